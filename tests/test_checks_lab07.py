"""Tests of dtf.checks.lab07: right, wrong and missing answers for every task.

The checkers of Tasks 1 and 2 hand TF_CONFIG texts to TensorFlow's own cluster resolver and
validation, in this process (a module fixture imports TensorFlow once, as the lab's Setup
does); the others compare text and dicts with what dtf.deploy and dtf.cluster.spec compute.
Each wrong answer is the right one with one realistic mistake (mutation-style), and its test
names the hint the learner gets. Every test stands alone.
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from dtf import checks, deploy
from dtf.checks import lab07
from dtf.cluster.spec import load
from tests.answers import stub
from tests.helpers import ROOT

POST = load(ROOT / "clusters" / "host_two_workers.json")
NAME, PORT = "dtf-cluster", 2222
COUNTS = {"worker": 2}


@pytest.fixture(scope="module")
def tensorflow():
    """TensorFlow imported once for the module, as the lab's Setup cell does (so that no
    test's own time includes the import)."""
    return lab07.import_tensorflow()


pytestmark = pytest.mark.usefixtures("fresh_scorecard", "tensorflow")  # conftest: fresh_scorecard


def expect_wrong(verdict, *fragments: str) -> None:
    assert verdict.status == checks.WRONG, verdict.message
    for fragment in fragments:
        assert fragment.lower() in verdict.message.lower(), verdict.message


# --------------------------------------------------------------------------- helpers


def test_course_file_is_found_from_the_lab_folders(tmp_path, monkeypatch) -> None:
    relative = "clusters/host_two_workers.json"
    for folder in (ROOT / "labs", ROOT / "labs" / "solutions", ROOT):
        monkeypatch.chdir(folder)
        assert lab07.course_file(relative) == ROOT / relative
    assert lab07.course_file(ROOT / relative) == ROOT / relative  # absolute
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="or any folder above it"):
        lab07.course_file(relative)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lab07.course_file(tmp_path / "missing.json")


def test_break_tfjob_breaks_a_copy_in_ways_the_validator_reports() -> None:
    good = deploy.tfjob(lab07.LAYOUT, name=NAME)
    before = copy.deepcopy(good)
    for variant, problem in (
        (0, "Workers.replicas: expected int, got '3'"),
        (1, "PS.replicas: expected int, got '1'"),
    ):
        broken = lab07.break_tfjob(good, variant)
        assert good == before  # the valid manifest is left alone
        with pytest.raises(deploy.ManifestError, match=problem):
            deploy.validate(broken)
    specs = lab07.break_tfjob(good)["spec"]["tfReplicaSpecs"]
    assert sorted(specs) == ["Chief", "PS", "Workers"]
    assert specs["PS"]["template"]["spec"]["containers"][0]["name"] == "tf"
    with pytest.raises(ValueError, match="variant must be 0 or 1"):
        lab07.break_tfjob(good, 2)


def test_the_lab_registers_six_tasks_the_fifth_optional() -> None:
    registered = checks.tasks("lab07")
    assert list(registered) == [1, 2, 3, 4, 5, 6]
    assert [t.optional for t in registered.values()] == [False, False, False, False, True, False]


def test_the_checkers_import_no_tensorflow() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from dtf import checks; from dtf.checks import lab07; "
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --------------------------------------------------------------------------- task 1


def _strategy_jobs(cluster):
    return {j: a for j, a in cluster.items() if j in ("chief", "worker", "ps", "evaluator")}


def tf_config_for(cluster, job, index):
    return json.dumps({"cluster": _strategy_jobs(cluster), "task": {"type": job, "index": index}})


def test_task1_right() -> None:
    first = lab07.task1(tf_config_for, POST)
    assert first.correct and first.message == (
        "Task 1: correct. 6 tasks of 3 clusters: TensorFlow's TFConfigClusterResolver reads from"
        " each TF_CONFIG the task and the cluster that task must see, and TensorFlow accepts it;"
        " for worker/1 of the lab's cluster, MultiWorkerMirroredStrategy would count 2 workers,"
        " this one not the chief, worker id 1."
    )
    assert lab07.task1(tf_config_for, POST).message == first.message  # again: the same


@pytest.mark.parametrize(
    "answer",
    [
        lambda c, j, i: json.dumps(
            {"task": {"index": i, "type": j}, "cluster": _strategy_jobs(c)}, indent=2
        ),
        lambda c, j, i: json.dumps(
            {
                "cluster": {k: tuple(v) for k, v in _strategy_jobs(c).items()},
                "task": {"type": j, "index": i},
            }
        ),
    ],
    ids=["other-order-indented", "tuples"],
)
def test_task1_other_right_answers(answer) -> None:
    assert lab07.task1(answer, POST).correct


def _task1(mistake):
    """tf_config_for with one mistake: ``mistake(config, cluster, job, index)`` returns the
    value to return."""

    def answer(cluster, job, index):
        config = {"cluster": _strategy_jobs(cluster), "task": {"type": job, "index": index}}
        return mistake(config, cluster, job, index)

    return answer


@pytest.mark.parametrize(
    "mistake, fragments",
    [
        (lambda c, *_: c, ["expected JSON text (a str), got a dict", "hold text"]),
        (lambda c, *_: str(c), ["not valid JSON", "str() of a dict writes Python"]),
        (lambda c, *_: json.dumps(c).encode(), ["expected a str, got bytes"]),
        (lambda c, *_: json.dumps([c]), ["expected a JSON object"]),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": j, "index": str(i)}}),
            ["your task's index is '1'", "refuses a str"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": j, "index": i + 1}}),
            ["The `task_id` 2 exceeds the maximum id of worker", "task indices start at 0"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": j, "index": float(i)}}),
            ["your index is 1.0, not a whole number"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": j, "index": i == 1}}),
            ["your index is True, not a whole number"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": j.upper(), "index": i}}),
            ["differs from the job's name only in its capitals"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": j.capitalize(), "index": i}}),
            [
                "TensorFlow refuses",
                "Unrecognized task_type: Worker",
                "differs from the job's name only in its capitals",
            ],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": f"/job:{j}", "index": i}}),
            ["your type is a device name, not the job's name alone"],
        ),
        (  # a worker's TF_CONFIG that says it is a parameter server
            lambda c, cl, j, i: json.dumps({**c, "task": {"type": "ps", "index": i}}),
            ["`task_type` 'ps' not found in cluster_spec", "look at the `job` argument"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "cluster": cl}),
            [
                "TensorFlow refuses your TF_CONFIG, as every tf.distribute strategy would:"
                " ValueError: Disallowed task type found in cluster spec. Allowed types are",
                "keeps 'host', a job no strategy accepts",
            ],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": f"{j}/{i}"}),
            ["your \"task\" is the text 'worker/1', not an object"],
        ),
        (
            lambda c, cl, j, i: json.dumps({**c, "task": {"job_name": j, "task_index": i}}),
            ['the keys of your "task" are', "TF1's command-line flags"],
        ),
        (
            lambda c, cl, j, i: json.dumps({"cluster": cl, "job_name": j, "task_index": i}),
            [
                "your TF_CONFIG has the keys ['cluster', 'job_name', 'task_index']",
                "the task's own keys (job_name, task_index) are at its top level",
            ],
        ),
        (
            lambda c, *_: json.dumps({**c, "environment": "cloud"}),
            ["your TF_CONFIG has the keys ['cluster', 'environment', 'task']", "yours has others"],
        ),
        (
            lambda c, cl, j, i: json.dumps(
                {**c, "cluster": {k: v[::-1] for k, v in c["cluster"].items()}}
            ),
            ["keep each job's addresses in their order"],
        ),
    ],
    ids=[
        "dict",
        "str-of-dict",
        "bytes",
        "json-list",
        "index-text",
        "index-from-1",
        "index-float",
        "index-bool",
        "type-upper",
        "replica-type",
        "device-name",
        "ps-for-a-worker",
        "host-kept",
        "task-text",
        "tf1-task-keys",
        "tf1-top-level",
        "extra-key",
        "reversed",
    ],
)
def test_task1_wrong(mistake, fragments) -> None:
    verdict = lab07.task1(_task1(mistake), POST)
    expect_wrong(verdict, "for worker/1 of the lab's cluster", *fragments)


def test_task1_wrong_only_for_other_clusters() -> None:
    # Right for the lab's file, wrong for the machines with DNS names: the checker's own
    # clusters catch an answer written for one layout.
    def workers_only(cluster, job, index):
        kept = {k: v for k, v in cluster.items() if k == "worker"}
        return json.dumps({"cluster": kept, "task": {"type": job, "index": index}})

    def own_job_only(cluster, job, index):
        return json.dumps({"cluster": {job: cluster[job]}, "task": {"type": job, "index": index}})

    verdict = lab07.task1(workers_only, POST)
    expect_wrong(verdict, "worker/1 of machines with DNS names", 'your "cluster" is')
    verdict = lab07.task1(own_job_only, POST)
    expect_wrong(verdict, "worker/1 of machines with DNS names", "every task gets the whole")


def test_task1_malformed_and_missing() -> None:
    expect_wrong(lab07.task1([], POST), "expected a function")
    expect_wrong(lab07.task1(lambda c, j, i: c["nope"], POST), "raised KeyError")
    expect_wrong(lab07.task1(tf_config_for, {"worker": 2}), "cannot use the lab's cluster")
    assert lab07.task1(stub, POST).status == checks.NOT_ATTEMPTED
    assert lab07.task1(None, POST).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- task 2


def tensorflow_reads(tf_config):
    """The lab's solution: the resolver's reading, TF_CONFIG put back as it was."""
    import tensorflow as tf

    old = os.environ.get("TF_CONFIG")
    os.environ["TF_CONFIG"] = tf_config
    try:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return resolver.task_type, resolver.task_id, resolver.cluster_spec().as_dict()
    finally:
        if old is None:
            del os.environ["TF_CONFIG"]
        else:
            os.environ["TF_CONFIG"] = old


def test_task2_right() -> None:
    os.environ.pop("TF_CONFIG", None)
    first = lab07.task2(tensorflow_reads, POST)
    assert first.correct and first.message == (
        "Task 2: correct. 7 TF_CONFIGs read as TensorFlow reads them, TF_CONFIG left as it was;"
        " for worker/1 of the lab's cluster: task_type 'worker', task_id 1, jobs ['worker']."
    )
    assert "TF_CONFIG" not in os.environ


def test_task2_parsing_the_text_by_hand_is_wrong() -> None:
    """The task asks what TensorFlow's resolver reads: the same three values parsed by hand
    were "correct" before issue 26; the checker sees that the resolver never read TF_CONFIG."""
    by_hand = lab07.task2(
        lambda t: (
            json.loads(t)["task"]["type"],
            json.loads(t)["task"]["index"],
            json.loads(t)["cluster"],
        ),
        POST,
    )
    expect_wrong(by_hand, "never asked TensorFlow's TFConfigClusterResolver", "ask it")
    expect_wrong(
        lab07.task2(lambda t: lab07.tensorflow_reads(t), POST),
        "calls `dtf.checks.lab07.tensorflow_reads`, the course's own code",
    )


def _no_reset(tf_config):
    import tensorflow as tf

    os.environ["TF_CONFIG"] = tf_config
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return resolver.task_type, resolver.task_id, resolver.cluster_spec().as_dict()


def _no_argument(tf_config):
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return resolver.task_type, resolver.task_id, resolver.cluster_spec().as_dict()


def _cluster_spec(tf_config):
    import tensorflow as tf

    with lab07.tf_config_environment(tf_config):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return resolver.task_type, resolver.task_id, resolver.cluster_spec()


def _always_deletes(tf_config):
    os.environ["TF_CONFIG"] = tf_config
    try:
        return tensorflow_reads(tf_config)
    finally:
        del os.environ["TF_CONFIG"]


@pytest.mark.parametrize(
    "answer, fragments",
    [
        (_no_reset, ["TF_CONFIG was absent before your function and", "when the resolver raises"]),
        (_no_argument, ["returned (None, None, {})", "takes no TF_CONFIG argument"]),
        (_cluster_spec, ["returned ('worker', 1, ClusterSpec(", "your cluster is not a dict"]),
        (
            _always_deletes,
            ["with TF_CONFIG already set: TF_CONFIG was another task's", "as it was, also"],
        ),
        (
            lambda t: tensorflow_reads(t)[:2],
            ["returned ('worker', 1)", "the three things the resolver answers"],
        ),
    ],
    ids=["not-put-back", "no-argument", "cluster-spec-object", "deleted-when-set", "two-values"],
)
def test_task2_wrong(answer, fragments) -> None:
    try:
        expect_wrong(lab07.task2(answer, POST), *fragments)
    finally:
        os.environ.pop("TF_CONFIG", None)


def test_task2_an_answer_that_reads_the_variable_already_set() -> None:
    """With TF_CONFIG set before the call, an answer that ignores its argument reads the old
    value: the hint names it."""
    old_reader = _no_argument
    os.environ.pop("TF_CONFIG", None)
    verdict = lab07.task2(
        lambda t: old_reader(t) if "TF_CONFIG" in os.environ else tensorflow_reads(t), POST
    )
    expect_wrong(verdict, "already set", "what does the environment hold")


def test_task2_malformed_and_missing() -> None:
    expect_wrong(lab07.task2("text", POST), "expected a function")
    expect_wrong(lab07.task2(tensorflow_reads, {"worker": 2}), "cannot use the lab's cluster")
    expect_wrong(lab07.task2(lambda t: t["task"], POST), "raised TypeError")
    assert lab07.task2(stub, POST).status == checks.NOT_ATTEMPTED
    assert lab07.task2(None, POST).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- task 3


def pod_addresses(name, counts, port, host="{name}-{job}-{i}.{name}", first=0):
    return {
        job: [f"{host.format(name=name, job=job, i=i)}:{port}" for i in range(first, first + n)]
        for job, n in counts.items()
    }


def test_task3_right() -> None:
    first = lab07.task3(pod_addresses, NAME, COUNTS, PORT)
    assert first.correct and first.message == (
        "Task 3: correct. 3 deployments match dtf.deploy.pod_dns_names; in yours, worker/1 is "
        "dtf-cluster-worker-1.dtf-cluster:2222."
    )
    assert lab07.task3(pod_addresses, NAME, COUNTS, PORT).message == first.message
    tuples = lab07.task3(
        lambda n, c, p: {j: tuple(a) for j, a in pod_addresses(n, c, p).items()}, NAME, COUNTS, PORT
    )
    assert tuples.correct
    other = lab07.task3(pod_addresses, "prod", {"worker": 4, "ps": 1}, 3000)
    assert other.correct and "worker/3 is prod-worker-3.prod:3000" in other.message


@pytest.mark.parametrize(
    "answer, fragments",
    [
        (
            lambda n, c, p: pod_addresses(n, c, p, host="{name}-{job}-{i}"),
            [
                "for name='dtf-cluster', counts={'worker': 2}, port=2222: "
                "'dtf-cluster-worker-0:2222' is not the address of worker/0's pod",
                "subdomain",
            ],
        ),
        (
            lambda n, c, p: pod_addresses(n, c, p, host="{name}-{job}-{i}.{name}.default.svc"),
            ["names the namespace and the cluster domain", "in any namespace"],
        ),
        (
            lambda n, c, p: pod_addresses(n, c, p, host="{job}-{i}.{name}"),
            [
                "'worker-0.dtf-cluster:2222' is not the address",
                "what is the name of the Job of this job?",
            ],
        ),
        (
            lambda n, c, p: pod_addresses(n, c, p, host="{name}-{i}.{name}"),
            ["holds the deployment, the job and the index"],
        ),
        (lambda n, c, p: pod_addresses(n, c, p, first=1), ["completion indices start at 0"]),
        (
            lambda n, c, p: {
                j: [a.rsplit(":", 1)[0] for a in v] for j, v in pod_addresses(n, c, p).items()
            },
            ["yours has no port"],
        ),
        (lambda n, c, p: pod_addresses(n, c, 2222), ["port=5000", "the same port, `port`"]),
        (
            lambda n, c, p: pod_addresses(n, {j: k for j, k in c.items() if j != "ps"}, p),
            ["your jobs are ['chief', 'worker'], not those of `counts`"],
        ),
        (
            lambda n, c, p: pod_addresses(n, {j: 2 for j in c}, p),
            [
                "counts={'chief': 1, 'worker': 3, 'ps': 2}",
                "job 'chief' has 2 address(es), not counts['chief']",
            ],
        ),
        (
            lambda n, c, p: {j: ",".join(v) for j, v in pod_addresses(n, c, p).items()},
            ["must be a list of addresses"],
        ),
        (lambda n, c, p: list(pod_addresses(n, c, p).values()), ["expected a dict"]),
        (
            lambda n, c, p: pod_addresses(n, c, p, host="{job}{i}.cluster.internal"),
            ["compare yours with the names the list above the task describes"],
        ),
    ],
    ids=[
        "no-subdomain",
        "namespace",
        "no-deployment-name",
        "no-job-name",
        "index-from-1",
        "no-port",
        "fixed-port",
        "job-dropped",
        "fixed-count",
        "text",
        "list",
        "machine-names",
    ],
)
def test_task3_wrong(answer, fragments) -> None:
    """A wrong address is named, never the right one (it was shown before issue 26)."""
    verdict = lab07.task3(answer, NAME, COUNTS, PORT)
    expect_wrong(verdict, *fragments)
    assert "expected 'dtf-cluster-" not in verdict.message
    assert "expected 'mnist-" not in verdict.message


def test_task3_refuses_the_course_s_pod_names() -> None:
    verdict = lab07.task3(lambda n, c, p: deploy.pod_dns_names(c, n, p), NAME, COUNTS, PORT)
    expect_wrong(verdict, "calls `dtf.deploy.pod_dns_names`, the course's own code")


def test_task3_bad_lab_parameters_and_missing() -> None:
    expect_wrong(lab07.task3(pod_addresses, "My_Cluster", COUNTS, PORT), "NAME='My_Cluster'")
    expect_wrong(lab07.task3(pod_addresses, NAME, COUNTS, 0), "fix NAME or PORT")
    expect_wrong(lab07.task3([], NAME, COUNTS, PORT), "expected a function")
    assert lab07.task3(stub, NAME, COUNTS, PORT).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- task 4

TYPES = deploy.TFJOB_REPLICA_TYPES


def make_repair(
    copy_first=True,
    names=True,
    counts=True,
    containers=True,
    strip=False,
    drop=False,
    image=None,
    keep_broken=False,
):
    """The lab's solution, with switches for the usual mistakes."""

    def repair(manifest):
        fixed = copy.deepcopy(manifest) if copy_first else manifest
        specs = fixed["spec"]["tfReplicaSpecs"]
        for replica in list(specs):
            job = replica.lower()
            if not names:
                new = replica
            elif strip:
                new = replica.rstrip("sS").capitalize()  # "PS" -> "P"
            else:
                new = TYPES[job[:-1] if job not in TYPES and job.endswith("s") else job]
            spec = specs.pop(replica)
            if drop and new != replica:
                continue  # a replica that needed a new name is left out
            specs[new] = spec
            if counts:
                spec["replicas"] = int(spec["replicas"])
            listed = spec["template"]["spec"]["containers"]
            if containers and deploy.TFJOB_CONTAINER not in [c["name"] for c in listed]:
                listed[0]["name"] = deploy.TFJOB_CONTAINER
            if image:
                listed[0]["image"] = image
        return None if keep_broken else fixed

    return repair


def test_task4_right() -> None:
    first = lab07.task4(make_repair(), NAME)
    assert first.correct and first.message == (
        "Task 4: correct. 3 TFJobs pass deploy.validate after your repair, with the replicas "
        "{'Chief': 1, 'Worker': 3, 'PS': 1}, and their inputs are unchanged."
    )
    assert lab07.task4(make_repair(), NAME).message == first.message
    by_json = lab07.task4(lambda m: make_repair(copy_first=False)(json.loads(json.dumps(m))), NAME)
    assert by_json.correct


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"copy_first": False},
            [
                "for the lab's broken TFJob: your function changed the manifest it was given",
                "the task asks for a repaired copy",
            ],
        ),
        (
            {"copy_first": False, "keep_broken": True},
            ["changed the manifest it was given"],
        ),
        ({"keep_broken": True}, ["expected the repaired manifest (a dict), got None"]),
        (
            {"counts": False},
            [
                "deploy.validate still refuses your repair",
                "expected int, got '3'",
                "a replicas value is text",
            ],
        ),
        (
            {"names": False},
            ["Workers: not a replica type", "deploy.TFJOB_REPLICA_TYPES"],
        ),
        (
            {"strip": True},
            ["tfReplicaSpecs.P: not a replica type", "'PS' ends with an S too"],
        ),
        (
            {"containers": False},
            ["no container named 'tensorflow'", "the name deploy.TFJOB_CONTAINER holds"],
        ),
        (
            {"drop": True},
            [
                "your repair changed the replicas, to {'Chief': 1, 'PS': 1}",
                "leaves every replica spec",
            ],
        ),
        (
            {"image": deploy.DEFAULT_IMAGE},
            [
                "for a TFJob broken in other ways",
                "also changed",
                "spec.tfReplicaSpecs.Chief.template.spec.containers[0].image",
                "to 'tensorflow/tensorflow:2.21.0'",
            ],
        ),
    ],
    ids=[
        "in-place",
        "in-place-none",
        "returns-none",
        "replicas-text",
        "names-kept",
        "strip-s",
        "container-name",
        "drops-replicas",
        "changes-image",
    ],
)
def test_task4_wrong(switches, fragments) -> None:
    expect_wrong(lab07.task4(make_repair(**switches), NAME), *fragments)


def test_task4_a_repair_that_rebuilds_the_manifest_is_refused() -> None:
    def rebuild(manifest):
        counts = {}
        for replica, spec in manifest["spec"]["tfReplicaSpecs"].items():
            job = replica.lower().removesuffix("s") if replica != "PS" else "ps"
            counts[job] = int(spec["replicas"])
        return deploy.tfjob(counts, name=manifest["metadata"]["name"])

    expect_wrong(lab07.task4(rebuild, NAME), "calls `dtf.deploy.tfjob`, the course's own code")


def test_task5_refuses_the_course_s_expansion() -> None:
    """``deploy.expand_tf_config`` does Task 5 (the lab's solution called it before issue 26);
    ``dtf.cluster.spec.tf_config`` writes the whole answer."""
    from dtf.cluster import spec

    def course(manifests, job, index):
        return deploy.expand_tf_config(tf_config_value(manifests, job), index)

    def rewritten(manifests, job, index):
        cluster = deploy.pod_dns_names(lab07.LAYOUT, NAME, PORT)
        return json.loads(spec.tf_config(cluster, spec.Task(job, index)))

    expect_wrong(lab07.task5(course, NAME, PORT), "calls `dtf.deploy.expand_tf_config`")
    expect_wrong(lab07.task5(rewritten, NAME, PORT), "calls `dtf.cluster.spec.tf_config`")


def test_task4_malformed_and_missing() -> None:
    expect_wrong(lab07.task4(lambda m: m["nope"], NAME), "raised KeyError")
    expect_wrong(lab07.task4(make_repair(), "Bad Name"), "cannot use the lab's TFJob")
    expect_wrong(lab07.task4("text", NAME), "expected a function")
    assert lab07.task4(stub, NAME).status == checks.NOT_ATTEMPTED
    assert lab07.task4(None, NAME).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- task 5


def tf_config_value(manifests, job):
    for manifest in manifests:
        if manifest["kind"] == "Job" and manifest["metadata"]["labels"]["dtf-job"] == job:
            env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
            return next(e["value"] for e in env if e["name"] == "TF_CONFIG")
    raise ValueError(job)


def expand(value, index):
    """What Kubernetes does to the template's TF_CONFIG, then what TensorFlow does."""
    return json.loads(value.replace("$(TASK_INDEX)", str(index)))


def tf_config_in_pod(manifests, job, index):
    return expand(tf_config_value(manifests, job), index)


def test_task5_right() -> None:
    first = lab07.task5(tf_config_in_pod, NAME, PORT)
    assert first.correct and first.message == (
        "Task 5: correct. 4 pods get the TF_CONFIG that Task 1 writes for Task 3's cluster; "
        "pod 2 of dtf-cluster-worker is worker/2 at dtf-cluster-worker-2.dtf-cluster:2222, "
        "read by TensorFlow's resolver as worker/2."
    )
    assert lab07.task5(tf_config_in_pod, NAME, PORT).message == first.message

    def by_name_by_hand(manifests, job, index):
        name = next(m["metadata"]["name"] for m in manifests if m["kind"] == "Service")
        (job_manifest,) = [m for m in manifests if m["metadata"]["name"] == f"{name}-{job}"]
        env = job_manifest["spec"]["template"]["spec"]["containers"][0]["env"]
        value = {e["name"]: e.get("value") for e in env}["TF_CONFIG"]
        return json.loads(value.replace("$(TASK_INDEX)", str(index)))

    assert lab07.task5(by_name_by_hand, NAME, PORT).correct


def lab_worker_job(manifests, job, index):
    """Always the third manifest: the lab's worker Job (a Service, chief, worker, ps)."""
    value = manifests[2]["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"]
    return expand(value, index)


@pytest.mark.parametrize(
    "answer, fragments",
    [
        (
            lambda m, j, i: tf_config_value(m, j),
            ["got the text", "Kubernetes replaces $(TASK_INDEX)"],
        ),
        (
            lambda m, j, i: json.loads(tf_config_value(m, j)),
            ["raised JSONDecodeError", "not JSON until Kubernetes replaces it"],
        ),
        (
            lambda m, j, i: json.dumps(tf_config_in_pod(m, j, i)),
            ["got the text", "the TF_CONFIG parsed, a dict"],
        ),
        (
            lambda m, j, i: tf_config_in_pod(m, j, 0),
            ["pod 2 of the 'worker' Job", "another pod's index"],
        ),
        (
            lab_worker_job,
            ["pod 0 of the 'chief' Job", "the Job of `job`, whatever the manifests' order"],
        ),
        (lambda m, j, i: tf_config_in_pod(m, j, i)["task"], ['your dict has no "task"']),
        (
            lambda m, j, i: {**tf_config_in_pod(m, j, i), "cluster": {}},
            ["your TF_CONFIG differs from this pod's at cluster", "the whole TF_CONFIG"],
        ),
        (lambda m, j, i: [tf_config_in_pod(m, j, i)], ["expected a dict, got ["]),
    ],
    ids=[
        "unexpanded",
        "json-loads",
        "text",
        "index-0",
        "fixed-job",
        "task-only",
        "cluster",
        "list",
    ],
)
def test_task5_wrong(answer, fragments) -> None:
    expect_wrong(lab07.task5(answer, NAME, PORT), *fragments)


def test_task5_malformed_and_missing() -> None:
    expect_wrong(lab07.task5(tf_config_in_pod, "-bad", PORT), "cannot use the lab's Indexed Jobs")
    expect_wrong(lab07.task5(42, NAME, PORT), "expected a function")
    assert lab07.task5(stub, NAME, PORT).status == checks.NOT_ATTEMPTED
    assert lab07.task5(None, NAME, PORT).status == checks.NOT_ATTEMPTED


def test_a_lab_run_scorecard() -> None:
    lab07.task1(tf_config_for, POST)
    lab07.task2(stub, POST)
    lab07.task3(pod_addresses, NAME, COUNTS, PORT)
    lab07.task4(make_repair(), NAME)
    assert checks.summary("lab07") == {
        1: "correct",
        2: "not attempted",
        3: "correct",
        4: "correct",
        5: "not attempted",
        6: "not attempted",
    }
    with pytest.raises(AssertionError, match="Task 2: not attempted"):
        checks.assert_all_correct("lab07")


def test_task4_the_plural_warning_only_where_a_name_lost_its_s() -> None:
    kept = lab07.task4(make_repair(names=False), NAME)
    expect_wrong(kept, "Workers: not a replica type")
    assert "careful" not in kept.message


def test_task4_a_capitalisation_slip_gets_its_own_hint() -> None:
    """'Ps' for 'PS' is a slip of capitals, not of an S: no plural warning (issue 18)."""

    def capitals(manifest):
        fixed = make_repair()(manifest)
        specs = fixed["spec"]["tfReplicaSpecs"]
        specs["Ps"] = specs.pop("PS")
        return fixed

    verdict = lab07.task4(capitals, NAME)
    expect_wrong(verdict, "Ps: not a replica type", "'Ps' differs from a replica type only in")
    assert "careful" not in verdict.message and "S too many" not in verdict.message


def test_task4_a_plural_is_named_a_plural() -> None:
    """'Workers' kept as it is: the hint says it has an S too many (issue 18)."""
    verdict = lab07.task4(make_repair(names=False), NAME)
    expect_wrong(verdict, "Workers: not a replica type", "'Workers' has an S too many")
    assert "capitals" not in verdict.message


def test_task5_a_key_error_from_the_manifests_order_gets_a_hint() -> None:
    """Picking the Job by its position raises KeyError on manifests in another order; the
    hint says the function depends on their order (issue 18)."""

    def by_position(manifests, job, index):
        manifest = manifests[1 + ["chief", "worker", "ps"].index(job)]
        value = manifest["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"]
        return expand(value, index)

    expect_wrong(
        lab07.task5(by_position, NAME, PORT),
        "pod 1 of the 'ps' job of another deployment",
        "raised KeyError",
        "any order",
        "Service mnist",
        "your function depends on their order",
    )


def test_task5_an_error_on_the_lab_s_own_manifests_is_not_blamed_on_their_order() -> None:
    """A wrong path into the manifests raises on the lab's own, in their order: the hint is
    the error's, not the one about order."""

    def wrong_path(manifests, job, index):
        return manifests[0]["spec"]["containers"][0]  # a Job's pod spec is under template

    verdict = lab07.task5(wrong_path, NAME, PORT)
    expect_wrong(verdict, "of the lab's Indexed Jobs", "raised KeyError")
    assert "order" not in verdict.message, verdict.message


# --------------------------------------------------------------------------- task 6

RIGHT_FAULTS = {
    "a": (f"{NAME}-worker", "subdomain"),
    "b": (NAME, "clusterIP"),
    "c": (f"{NAME}-chief", "TF_CONFIG"),
    "d": (f"{NAME}-worker", "restartPolicy"),
    "e": (f"{NAME}-worker", "parallelism"),
}


def faults(**changes):
    chosen = {**RIGHT_FAULTS, **changes}
    return lambda: chosen


def test_task6_every_broken_deployment_passes_the_validator() -> None:
    """The faults are of meaning: deploy.validate accepts every manifest, and each case
    differs from the valid deployment in exactly the manifest the answer names."""
    good = deploy.indexed_jobs(lab07.LAYOUT, name=NAME, port=PORT)
    for case, manifests in lab07.broken_deployments(NAME, PORT).items():
        for manifest in manifests:
            deploy.validate(manifest)
        changed = [g["metadata"]["name"] for g, b in zip(good, manifests, strict=True) if g != b]
        assert changed == [RIGHT_FAULTS[case][0]], case
    shown = lab07.show_deployment(lab07.broken_deployments(NAME, PORT)["e"])
    assert f"Job {NAME}-worker: completions=3, parallelism=1" in shown


def test_task6_refuses_the_checker_s_own_table() -> None:
    verdict = lab07.task6(lambda: {c: (j, f) for c, j, f, _ in lab07.FAULTS}, NAME, PORT)
    assert verdict.status == "wrong"
    assert "reads `dtf.checks.lab07.FAULTS`, the course's own code" in verdict.message


def test_task6_right() -> None:
    verdict = lab07.task6(faults(), NAME, PORT)
    assert verdict.correct, verdict.message
    assert verdict.message.startswith("Task 6: correct. You found the fault of all 5 deployments")
    paths = faults(
        a=(f"{NAME}-worker", "spec.template.spec.subdomain"),
        c=(f"{NAME}-chief", "spec.template.spec.containers[0].env[1]"),
        d=(f"{NAME}-worker", "podFailurePolicy"),
    )
    assert lab07.task6(paths, NAME, PORT).correct


@pytest.mark.parametrize(
    "changes, fragments",
    [
        (
            {"a": (NAME, "subdomain")},
            ["for case 'a': dtf-cluster is as a working deployment needs it", "which names"],
        ),
        (
            {"d": (f"{NAME}-worker", "completions")},
            ["for case 'd': the field 'completions' of dtf-cluster-worker is as", "another"],
        ),
        ({"e": ("worker", "parallelism")}, ["no manifest named 'worker'", "metadata.name"]),
        ({"b": "clusterIP"}, ["for 'b': expected (manifest, field)"]),
    ],
    ids=["wrong-manifest", "wrong-field", "not-a-name", "not-a-pair"],
)
def test_task6_wrong(changes, fragments) -> None:
    verdict = lab07.task6(faults(**changes), NAME, PORT)
    expect_wrong(verdict, *fragments)
    right_field = dict(RIGHT_FAULTS)[next(iter(changes))][1]
    assert right_field not in verdict.message.partition("Hint:")[2]  # the hint names no answer


def test_task6_malformed_and_missing() -> None:
    expect_wrong(lab07.task6(lambda: [], NAME, PORT), "expected a dict {case: (manifest")
    expect_wrong(lab07.task6(lambda: {"a": RIGHT_FAULTS["a"]}, NAME, PORT), "no entry for case 'b'")
    expect_wrong(lab07.task6(faults(), "-bad", PORT), "cannot use the lab's Indexed Jobs")
    assert lab07.task6(stub, NAME, PORT).status == checks.NOT_ATTEMPTED
