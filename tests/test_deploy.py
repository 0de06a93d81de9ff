"""Tests for ``dtf.deploy``: from one cluster file to per-host commands, TF_CONFIG files and
Kubernetes manifests.

The manifests are validated against the real schemas (the ``kubernetes`` client's API models
and the ``kubeflow-training`` SDK's TFJob models), and every rule the validator adds is shown
to catch a broken manifest. The generated per-host commands and the default container command
are run for real: they start TensorFlow servers that answer.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time

import pytest
import yaml

from dtf import deploy
from dtf.cluster import ClusterConfigError, answers, free_ports
from dtf.cluster.spec import Task, tf_config

from .helpers import QUIET_ENV, ROOT
from .tf_validation import DISALLOWED, tensorflow_verdicts

pytestmark = pytest.mark.timeout(240)
READY_WITHIN_S = 90.0
POST = ROOT / "clusters" / "host_two_workers.json"
PS_SPEC = {"chief": 1, "worker": 3, "ps": 2}


def _env(**extra) -> dict:
    env = {**os.environ, **QUIET_ENV, **extra}
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


# --------------------------------------------------------------------------- hosts and TF_CONFIG


def test_host_commands_name_every_task_and_skip_the_client():
    rows = deploy.host_commands(POST, exclude="host")
    assert [r["task"] for r in rows] == ["host/0", "worker/0", "worker/1"]
    assert [r["port"] for r in rows] == ["2222", "2223", "2224"]
    assert "no server" in rows[0]["command"]
    command = "python -m dtf.cluster.server --config cluster.json --job worker --task 1"
    assert rows[2]["command"] == command


def test_tf_configs_are_the_cluster_module_s():
    configs = deploy.tf_configs(POST)
    jobs = json.loads(POST.read_text())
    assert set(configs) == {"worker/0", "worker/1"}  # host is no strategy's job
    assert configs["worker/1"] == tf_config(jobs, Task("worker", 1))
    assert json.loads(configs["worker/0"])["cluster"] == {"worker": jobs["worker"]}


def _pod_tf_configs(what: str, spec, exclude=None) -> dict[str, str]:
    """The TF_CONFIG of every pod of the Indexed Jobs of ``spec``, as each pod composes it."""
    configs = {}
    for job in deploy.indexed_jobs(spec, exclude=exclude)[1:]:
        env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        for index in range(job["spec"]["completions"]):
            value = deploy.expand_tf_config(env["TF_CONFIG"]["value"], index)
            configs[f"{what} pod {job['metadata']['name']}-{index}"] = json.dumps(value)
    return configs


@pytest.mark.slow
def test_every_generated_tf_config_passes_tensorflow_s_own_validation():
    machines = {
        job: [f"{job}{i}.example:2222" for i in range(n)]
        for job, n in {**PS_SPEC, "evaluator": 1}.items()
    }
    configs = {f"file {t}": c for t, c in deploy.tf_configs(POST).items()}
    configs |= {f"machines {t}": c for t, c in deploy.tf_configs(machines).items()}
    configs |= _pod_tf_configs("ps", PS_SPEC) | _pod_tf_configs("file", POST, exclude="host")
    assert len(configs) == 2 + 7 + 6 + 2
    configs["host kept"] = json.dumps(
        {**json.loads(configs["file worker/0"]), "cluster": json.loads(POST.read_text())}
    )
    verdicts = tensorflow_verdicts(configs)
    refused = verdicts.pop("host kept")
    assert refused is not None and refused.startswith(DISALLOWED)  # the check can fail
    assert verdicts == dict.fromkeys(verdicts), verdicts


def test_counts_have_no_hosts_to_name():
    with pytest.raises(ClusterConfigError, match="job 'worker' is given as a number of tasks"):
        deploy.host_commands({"worker": 2})


@pytest.mark.slow
def test_generated_host_commands_start_real_servers(tmp_path):
    ports = free_ports(2)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    written, skipped = deploy.write(tmp_path / "spec.json", tmp_path / "out")
    assert skipped == []
    commands = (tmp_path / "out" / "hosts.txt").read_text().splitlines()
    commands = [c for c in commands if c.startswith("python -m dtf.cluster.server")]
    assert len(commands) == 2
    procs = []
    try:
        for command in commands:  # as a user would type it, in the generated folder
            argv = [sys.executable, *command.split()[1:]]
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=tmp_path / "out",
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    env=_env(PYTHONPATH=str(ROOT / "src")),
                )
            )
        for proc, port in zip(procs, ports, strict=True):
            line = proc.stdout.readline()
            assert line.startswith("dtf-server ready:"), proc.stderr.read()[-2000:]
            assert f"target=grpc://127.0.0.1:{port}" in line
            assert answers(f"127.0.0.1:{port}", timeout=10)
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate(timeout=30)


# --------------------------------------------------------------------------- TFJob


def test_tfjob_of_a_ps_cluster_validates():
    manifest = deploy.tfjob(PS_SPEC, name="mnist", namespace="team-a")
    deploy.validate(manifest)
    replicas = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Chief": 1, "Worker": 3, "PS": 2}
    container = replicas["PS"]["template"]["spec"]["containers"][0]
    assert container["name"] == "tensorflow" and container["image"] == deploy.DEFAULT_IMAGE
    assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
    assert manifest["metadata"] == {
        "name": "mnist",
        "namespace": "team-a",
        "labels": {"dtf-cluster": "mnist"},
    }


# The values of a TFJob's spec.runPolicy.cleanPodPolicy and what the training operator v1 does
# with the pods once the job has ended, succeeded or failed (kubeflow/training-operator,
# pkg/apis/kubeflow.org/v1 common_types.go and tensorflow_defaults.go). The SDK's
# KubeflowOrgV1RunPolicy types the field as a free string, so its model cannot check it.
CLEAN_POD_POLICIES = {
    "All": "delete every pod, the finished ones and their logs too",
    "Running": "delete the pods still running (the parameter servers, which never exit by "
    "themselves); keep the finished ones and their logs",
    "None": "delete nothing (what the operator assumes when the field is absent): the "
    "parameter servers keep running, holding their nodes",
}


def test_a_finished_tfjob_deletes_only_its_still_running_pods():
    from kubeflow.training.models import KubeflowOrgV1RunPolicy, KubeflowOrgV1TFJobSpec

    assert KubeflowOrgV1TFJobSpec.attribute_map["run_policy"] == "runPolicy"
    assert KubeflowOrgV1RunPolicy.attribute_map["clean_pod_policy"] == "cleanPodPolicy"
    for spec in (PS_SPEC, {"worker": 2}, POST):
        manifest = deploy.tfjob(spec, exclude="host" if spec is POST else None)
        deploy.validate(manifest)
        # exactly this, no more: every other run policy keeps the operator's default
        assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert manifest["spec"]["runPolicy"]["cleanPodPolicy"] in CLEAN_POD_POLICIES


def test_gpus_per_pod_and_the_gpu_image():
    manifests = [deploy.tfjob({"worker": 2}, gpus=2), *deploy.indexed_jobs({"worker": 2}, gpus=2)]
    for manifest in manifests:
        deploy.validate(manifest)
    tf_container = manifests[0]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    job_container = manifests[2]["spec"]["template"]["spec"]
    for container in (tf_container["containers"][0], job_container["containers"][0]):
        assert container["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
        assert container["image"] == deploy.DEFAULT_GPU_IMAGE
    plain = deploy.tfjob({"worker": 1}, image="registry.example/me/train:1")
    container = plain["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert "resources" not in container and container["image"] == "registry.example/me/train:1"
    for bad in (-1, 1.0, True, 17):
        with pytest.raises(ClusterConfigError, match="gpus"):
            deploy.tfjob({"worker": 1}, gpus=bad)


def test_tfjob_of_the_post_needs_its_client_left_out():
    with pytest.raises(ClusterConfigError, match="job 'host' has no TFJob replica type.*exclude"):
        deploy.tfjob(POST)
    manifest = deploy.tfjob(POST, exclude="host", command="python train.py --epochs 3")
    deploy.validate(manifest)
    (container,) = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "train.py", "--epochs", "3"]


@pytest.mark.parametrize(
    "spec, exclude, message",
    [
        ({"chief": 1, "master": 1, "worker": 1}, None, "at most one of 'chief' and 'master'"),
        ({"worker": 2}, "worker/0", "whole jobs only"),
        ({"worker": 2}, "wroker", "unknown job 'wroker'"),
    ],
)
def test_tfjob_refuses(spec, exclude, message):
    with pytest.raises(ClusterConfigError, match=message):
        deploy.tfjob(spec, exclude=exclude)


def _container(m):
    return m["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


TFJOB_BREAKS = {
    "a misspelt field": (lambda m: _container(m).update(imagee="x"), "not a field of V1Container"),
    "a container without a name": (lambda m: _container(m).pop("name"), "`name`, must not be"),
    "replicas as text": (
        lambda m: m["spec"]["tfReplicaSpecs"]["Worker"].update(replicas="2"),
        "expected int, got '2'",
    ),
    "no replica specs": (lambda m: m["spec"].pop("tfReplicaSpecs"), "tf_replica_specs"),
    "an unknown replica type": (
        lambda m: m["spec"]["tfReplicaSpecs"].update(
            Workers=m["spec"]["tfReplicaSpecs"].pop("Worker")
        ),
        "not a replica type",
    ),
    "no tensorflow container": (lambda m: _container(m).update(name="tf"), "no container named"),
    "no container at all": (
        lambda m: m["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"].update(containers=[]),
        "Worker: no container",
    ),
    "no image": (lambda m: _container(m).update(image=""), "without an image"),
    "chief and master": (
        lambda m: m["spec"]["tfReplicaSpecs"].update(
            Chief=copy.deepcopy(m["spec"]["tfReplicaSpecs"]["Worker"]),
            Master=copy.deepcopy(m["spec"]["tfReplicaSpecs"]["Worker"]),
        ),
        "more than one of Chief and Master",
    ),
    "a name with a leading digit": (
        lambda m: m["metadata"].update(name="1job"),
        "not a DNS-1035 label",
    ),
    "env as a mapping": (lambda m: _container(m).update(env={"A": "1"}), "expected a list"),
}


def _caught(manifest: dict, breaks, message: str) -> None:
    """``manifest`` validates, and no longer does once ``breaks`` has changed it."""
    deploy.validate(manifest)
    breaks(manifest)
    with pytest.raises(deploy.ManifestError, match=message):
        deploy.validate(manifest)


@pytest.mark.parametrize("what", sorted(TFJOB_BREAKS))
def test_broken_tfjobs_are_caught(what):
    _caught(deploy.tfjob({"worker": 2}), *TFJOB_BREAKS[what])


# --------------------------------------------------------------------------- Indexed Jobs


def test_indexed_jobs_validate_and_compose_each_pod_s_tf_config():
    manifests = deploy.indexed_jobs(PS_SPEC, name="mnist")
    for manifest in manifests:
        deploy.validate(manifest)
    service, *jobs = manifests
    assert [m["kind"] for m in manifests] == ["Service", "Job", "Job", "Job"]
    assert service["spec"]["clusterIP"] == "None"
    cluster = deploy.pod_dns_names(PS_SPEC, name="mnist")
    assert cluster["worker"] == [f"mnist-worker-{i}.mnist:2222" for i in range(3)]
    for job_name, job in zip(PS_SPEC, jobs, strict=True):
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed"
        assert spec["completions"] == spec["parallelism"] == PS_SPEC[job_name]
        pod = spec["template"]
        # The Service selects every pod, and is every pod's subdomain: DNS records.
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        assert pod["spec"]["subdomain"] == service["metadata"]["name"]
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        field = env["TASK_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
        assert names.index("TASK_INDEX") < names.index("TF_CONFIG")  # $(VAR) needs it first
        for index in range(PS_SPEC[job_name]):
            config = deploy.expand_tf_config(env["TF_CONFIG"]["value"], index)
            assert config == {"cluster": cluster, "task": {"type": job_name, "index": index}}
            # Kubernetes names an Indexed Job's pod <Job name>-<index>: the task's DNS name.
            host = f"{job['metadata']['name']}-{index}"
            assert cluster[job_name][index] == f"{host}.mnist:2222"


def test_indexed_jobs_replace_failed_pods_through_a_pod_failure_policy():
    # Never: the Job controller replaces a failed pod and applies podFailurePolicy (which
    # the API refuses with OnFailure). A preempted worker (checkpoint saved, exit 42) and a
    # pod Kubernetes evicted do not count against backoffLimit; any other failure does.
    from dtf.multiworker import EXIT_PREEMPTED

    assert deploy.PREEMPTED_EXIT_CODE == EXIT_PREEMPTED == 42
    for job in deploy.indexed_jobs(PS_SPEC)[1:]:
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert "livenessProbe" not in pod["containers"][0]  # a TCP probe misses hangs
        assert pod["containers"][0]["name"] == "tensorflow"
        assert job["spec"]["podFailurePolicy"] == {
            "rules": [
                {
                    "action": "Ignore",
                    "onExitCodes": {
                        "containerName": "tensorflow",
                        "operator": "In",
                        "values": [42],
                    },
                },
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
            ]
        }


def test_indexed_jobs_refuse_jobs_no_strategy_accepts_and_clashes():
    # Every pod's TF_CONFIG is a strategy's: a job TensorFlow's strategies refuse is refused.
    with pytest.raises(ClusterConfigError, match="job 'host' cannot be an Indexed Job"):
        deploy.indexed_jobs(POST)
    with pytest.raises(ClusterConfigError, match="'my_job'.*exclude='my_job'"):
        deploy.indexed_jobs({"worker": 1, "my_job": 1}, name="x")
    manifests = deploy.indexed_jobs(POST, exclude="host", name="x")
    assert [m["metadata"]["name"] for m in manifests] == ["x", "x-worker"]
    assert deploy.pod_dns_names({"worker": 1, "my_job": 1}, name="x")["my_job"] == [
        "x-my-job-0.x:2222"
    ]
    with pytest.raises(ClusterConfigError, match="both become the Kubernetes name 'x-worker'"):
        deploy.pod_dns_names({"worker": 1, "Worker": 1}, name="x")


@pytest.mark.parametrize("name", ["", "Mnist", "1mnist", "mnist-", "a_b", "x" * 41])
def test_bad_names_are_refused(name):
    with pytest.raises(ClusterConfigError, match="is not valid"):
        deploy.indexed_jobs({"worker": 1}, name=name)


JOB_BREAKS = {
    "a restart policy Jobs refuse": (
        lambda m: m["spec"]["template"]["spec"].update(restartPolicy="Always"),
        "OnFailure or Never",
    ),
    "a pod failure policy with OnFailure": (
        lambda m: m["spec"]["template"]["spec"].update(restartPolicy="OnFailure"),
        "podFailurePolicy: needs spec.template.spec.restartPolicy Never",
    ),
    "a pod failure rule without an action": (
        lambda m: m["spec"]["podFailurePolicy"]["rules"][0].pop("action"),
        "`action`, must not be",
    ),
    "no template": (lambda m: m["spec"].pop("template"), "`template`, must not be"),
    "an env entry without a name": (
        lambda m: m["spec"]["template"]["spec"]["containers"][0]["env"][1].pop("name"),
        "`name`, must not be",
    ),
    "completions as text": (lambda m: m["spec"].update(completions="2"), "expected int"),
    "zero completions": (lambda m: m["spec"].update(completions=0), "completions >= 1"),
}


@pytest.mark.parametrize("what", sorted(JOB_BREAKS))
def test_broken_jobs_are_caught(what):
    _caught(deploy.indexed_jobs({"worker": 2})[1], *JOB_BREAKS[what])


def test_broken_service_and_unknown_kinds_are_caught():
    service = deploy.indexed_jobs({"worker": 2})[0]
    service["spec"]["clusterIp"] = service["spec"].pop("clusterIP")
    with pytest.raises(deploy.ManifestError, match="did you mean 'clusterIP'"):
        deploy.validate(service)
    with pytest.raises(deploy.ManifestError, match="unsupported apiVersion/kind"):
        deploy.validate({"apiVersion": "apps/v1", "kind": "Deployment"})


@pytest.mark.slow
def test_default_container_command_starts_a_server_from_tf_config():
    """What every pod runs by default, run here: plain TensorFlow, TF_CONFIG in, a server out."""
    (port,) = free_ports(1)
    config = tf_config({"worker": [f"127.0.0.1:{port}"]}, Task("worker", 0))
    argv = list(deploy.SERVER_COMMAND)
    argv[0] = sys.executable
    proc = subprocess.Popen(
        argv,
        env=_env(TF_CONFIG=config),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while not answers(f"127.0.0.1:{port}", timeout=1):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.communicate(timeout=30)


# --------------------------------------------------------------------------- files and CLI


def test_cli_writes_every_file_and_checks_the_manifests(tmp_path, capsys):
    out = tmp_path / "deploy"
    rc = deploy.main([str(POST), "--out", str(out), "--exclude", "host", "--check"])
    printed = capsys.readouterr().out
    assert rc == 0 and "manifests valid" in printed
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [
        ".dtf-deploy-written",
        "cluster.json",
        "hosts.txt",
        "kubernetes/indexed-jobs.yaml",
        "kubernetes/tfjob.yaml",
        "tf_config/worker-0.json",
        "tf_config/worker-1.json",
    ]
    assert json.loads((out / "cluster.json").read_text()) == json.loads(POST.read_text())
    text = (out / "kubernetes" / "indexed-jobs.yaml").read_text()
    assert "&id" not in text  # no YAML anchors: each object reads on its own
    documents = list(yaml.safe_load_all(text))
    assert documents == deploy.indexed_jobs(POST, exclude="host")
    (tfjob,) = yaml.safe_load_all((out / "kubernetes" / "tfjob.yaml").read_text())
    deploy.validate(tfjob)


def test_cli_says_what_it_could_not_write(tmp_path, capsys):
    assert deploy.main([str(POST), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "not written: kubernetes/tfjob.yaml: job 'host'" in printed
    assert "not written: kubernetes/indexed-jobs.yaml: job 'host'" in printed
    assert sorted(p.name for p in (tmp_path / "tf_config").iterdir()) == [
        "worker-0.json",
        "worker-1.json",
    ]
    counts = tmp_path / "counts.json"
    counts.write_text('{"worker": 2, "ps": 1}')
    assert deploy.main([str(counts), "--out", str(tmp_path / "c")]) == 0
    printed = capsys.readouterr().out
    assert "not written: hosts.txt and tf_config/" in printed
    assert (tmp_path / "c" / "kubernetes" / "tfjob.yaml").is_file()
    assert json.loads((tmp_path / "c" / "cluster.json").read_text()) == {"worker": 2, "ps": 1}
    # The same folder again, from the post's file: no manifest, and no file left from before.
    assert deploy.main([str(POST), "--out", str(tmp_path / "c")]) == 0
    assert not (tmp_path / "c" / "kubernetes" / "tfjob.yaml").exists()
    assert not (tmp_path / "c" / "kubernetes" / "indexed-jobs.yaml").exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"worker": ["10.0.0.2:2222",]}', "is not valid JSON: .* at line 1 column"),
        ('{"wroker": ["10.0.0.2:2222"]}', "Did you mean 'worker'"),
        ('{"worker": ["10.0.0.2"]}', "is not 'host:port'"),
        ("", "is empty"),
    ],
)
def test_a_malformed_cluster_file_is_one_clear_error(tmp_path, text, message):
    bad = tmp_path / "cluster.json"
    bad.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "dtf.deploy", str(bad), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dtf.deploy: ")
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "out").exists()  # nothing half-written
