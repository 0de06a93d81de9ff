"""From one cluster file to a real deployment: ``python -m dtf.deploy CLUSTER.json``.

The cluster file of the course (``{"host": ["10.0.0.1:2222"], "worker": [...]}``, the
``config.json`` of the *Distributed Computation in TensorFlow* post) is the single source of
every deployment. From it this module writes, into one folder (``--out``, default
``build/deploy``)::

    cluster.json              the checked spec: copy it to every machine
    hosts.txt                 per machine, the command that starts its task
                              (python -m dtf.cluster.server, or dtf-server)
    tf_config/worker-1.json   the TF_CONFIG of each chief, worker, ps and evaluator task, for
                              tf.distribute strategies (which refuse other jobs, e.g. host)
    kubernetes/tfjob.yaml     a TFJob for the Kubeflow training operator v1
    kubernetes/indexed-jobs.yaml   the same cluster with no operator: a headless Service and
                              one Indexed Job per job of the spec
    .dtf-deploy-written       the list of files written: a later run into the same folder
                              deletes those of them it no longer writes, and no other file

Two Kubernetes forms, because the ecosystem is moving. The ``TFJob`` (``kubeflow.org/v1``)
of the Kubeflow training operator v1 is still widely deployed, but Kubeflow Trainer v2 no
longer supports it and the v1 operator is no longer maintained (kubeflow/trainer#2699). The
operator-free form needs nothing but Kubernetes (Indexed Jobs are stable since 1.24): each
pod learns its index from the annotation ``batch.kubernetes.io/job-completion-index``, gets
the stable host name ``<job name>-<index>``, and the headless Service (``clusterIP: None``,
named as the pods' ``subdomain``) gives that host name a DNS record, so every pod composes
its own ``TF_CONFIG`` from its index and the other pods' names, with no API call.

In both forms every task listens on the same port (``--port``, default 2222): each pod has an
address of its own, as each machine of the post does; the cluster file's hosts and ports are
replaced by the pods' DNS names. Only the jobs and the number of tasks carry over, so a spec
of counts (``{"worker": 2, "ps": 1}``) is enough for Kubernetes; ``hosts.txt`` and the
``TF_CONFIG`` files need addresses.

The container runs, by default, a bare TensorFlow server built from ``TF_CONFIG`` in plain
TensorFlow (:data:`SERVER_SNIPPET`, no course package needed in the image), with the course's
gRPC keepalive defaults; ``--command`` puts your training script there instead. The image is
``--image``, by default :data:`DEFAULT_IMAGE`, or :data:`DEFAULT_GPU_IMAGE` with ``--gpus N``,
which asks for N of ``nvidia.com/gpu`` (NVIDIA's device plugin) per pod. The operator adds
``TF_CONFIG`` to a TFJob's pods itself; the Indexed Jobs set it from the pod's index with
Kubernetes' ``$(VAR)`` expansion.

Security, as everywhere in the course: a TensorFlow server runs any graph sent to it, with
no authentication. Keep the pods' port inside the cluster (no ``LoadBalancer``, no
``NodePort``), and add a NetworkPolicy that admits only the job's own pods where the cluster
enforces them.

:func:`validate` checks a manifest against the real schemas: the Kubernetes API's models
(the ``kubernetes`` Python client, generated from the Kubernetes OpenAPI spec) and the
training operator's own Python SDK models (``kubeflow-training``); ``tests/test_deploy.py``
validates every generated manifest, and ``--check`` does the same from the command line.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from dtf._util import command_name
from dtf.cluster import env as cluster_env
from dtf.cluster.spec import (
    STRATEGY_JOBS,
    ClusterConfigError,
    all_tasks,
    load,
    select_tasks,
    split_address,
    strategy_jobs,
    tf_config,
)
from dtf.multiworker.worker import EXIT_PREEMPTED

#: The image of the default container: TensorFlow's own, at the course's version.
DEFAULT_IMAGE = "tensorflow/tensorflow:2.21.0"
#: The same with CUDA, the default when the pods ask for GPUs.
DEFAULT_GPU_IMAGE = "tensorflow/tensorflow:2.21.0-gpu"
#: The extended resource NVIDIA's Kubernetes device plugin offers GPUs as.
GPU_RESOURCE = "nvidia.com/gpu"
#: The port every task listens on inside Kubernetes (each pod has its own address).
DEFAULT_PORT = 2222
#: The deployment's name when none is given (Kubernetes object names start with it).
DEFAULT_NAME = "dtf-cluster"
#: What the default container runs: a TensorFlow server for the task ``TF_CONFIG`` names.
SERVER_SNIPPET = (
    "import json, os, tensorflow as tf; c = json.loads(os.environ['TF_CONFIG']); "
    "tf.distribute.Server(tf.train.ClusterSpec(c['cluster']), job_name=c['task']['type'], "
    "task_index=c['task']['index'], start=True).join()"
)
SERVER_COMMAND = ("python", "-c", SERVER_SNIPPET)
#: The TFJob replica type of each TensorFlow job name the training operator knows.
TFJOB_REPLICA_TYPES = {
    "chief": "Chief",
    "master": "Master",
    "worker": "Worker",
    "ps": "PS",
    "evaluator": "Evaluator",
}
#: The training operator sets TF_CONFIG only in the container with this name.
TFJOB_CONTAINER = "tensorflow"
#: The port name the training operator looks for (it uses 2222 when there is none).
TFJOB_PORT_NAME = "tfjob-port"
#: Label on every pod of a deployment (the headless Service selects them by it).
CLUSTER_LABEL = "dtf-cluster"
JOB_LABEL = "dtf-job"
#: The pod annotation an Indexed Job's controller sets to the pod's completion index.
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
#: The environment variable the Indexed Jobs' pods read their index into.
INDEX_ENV = "TASK_INDEX"
#: The exit status of a worker that saved a checkpoint on a preemption notice and left:
#: ``PreemptionCheckpointHandler``'s default, the one the course's worker program uses.
PREEMPTED_EXIT_CODE = EXIT_PREEMPTED

#: A DNS-1035 label (what the training operator requires of a TFJob's name): it starts with
#: a letter. Kubernetes' own objects accept DNS-1123 labels, which this satisfies too.
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MAX = 63


#: The file in ``--out`` that lists what :func:`write` wrote there: the only files a later
#: run deletes.
RECORD = ".dtf-deploy-written"


class ManifestError(ValueError):
    """A manifest does not match the schema of its kind; the message lists every problem."""


# --------------------------------------------------------------------------- the spec


def _jobs(spec, exclude=None) -> dict[str, list[str | None]]:
    """The checked spec without the excluded tasks' jobs (a job is dropped only whole)."""
    jobs = load(spec)
    _check_not_empty(jobs, exclude)
    _check_whole_jobs(jobs, exclude)
    dropped = select_tasks(exclude, jobs)
    return {job: a for job, a in jobs.items() if not any(t.job == job for t in dropped)}


def _check_whole_jobs(jobs: Mapping[str, list], exclude) -> None:
    """Refuse an ``exclude`` that names only some tasks of a job: every form of the
    deployment numbers a job's tasks 0, 1, ..., so a task cannot be left out of the middle."""
    dropped = select_tasks(exclude, jobs)
    for job, addresses in jobs.items():
        gone = sorted(t.index for t in dropped if t.job == job)
        if gone and len(gone) != len(addresses):
            kept = [i for i in range(len(addresses)) if i not in gone]
            raise ClusterConfigError(
                f"exclude (--exclude) names only some tasks of job {job!r} "
                f"({', '.join(f'{job}/{i}' for i in gone)}; not "
                f"{', '.join(f'{job}/{i}' for i in kept)}): a deployment leaves out whole jobs "
                "only. Exclude the client's job (e.g. --exclude host), or remove the task from "
                "the cluster file."
            )


#: The jobs whose tasks do the work: a deployment that keeps none of them trains nothing.
_WORKING_JOBS = ("chief", "master", "worker")


def _check_not_empty(jobs: Mapping[str, list], exclude) -> None:
    """Refuse an ``exclude`` that leaves nothing to deploy: no task at all, or none of the
    chief, master and worker tasks the spec has (only a client, ps or evaluator left)."""
    dropped = select_tasks(exclude, jobs)
    kept = [t for t in all_tasks(jobs) if t not in dropped]
    working = [job for job in jobs if job in _WORKING_JOBS]
    if not kept:
        raise ClusterConfigError(
            f"exclude (--exclude) leaves out every task ({', '.join(jobs)}): the deployment "
            "would be empty. Exclude only the client job (e.g. --exclude host)."
        )
    if working and not any(t.job in _WORKING_JOBS for t in kept):
        raise ClusterConfigError(
            f"exclude (--exclude) leaves out every task of {', '.join(repr(j) for j in working)}:"
            " no task would train. Exclude only the client job (e.g. --exclude host)."
        )


def _with_addresses(jobs: Mapping[str, list[str | None]], what: str) -> dict[str, list[str]]:
    counted = [job for job, addresses in jobs.items() if None in addresses]
    if counted:
        raise ClusterConfigError(
            f"{what} need an address for every task, but job {counted[0]!r} is given as a "
            "number of tasks: write its 'host:port' addresses in the cluster file."
        )
    return {job: [a for a in addresses if a is not None] for job, addresses in jobs.items()}


def host_commands(spec, config_name: str = "cluster.json", exclude=None) -> list[dict[str, str]]:
    """One entry per task: ``{"task", "host", "port", "command"}``, where ``command``
    starts the task's server on its machine (``python -m dtf.cluster.server``). ``exclude``: tasks
    (or jobs) that get no server, such as the post's ``host``, where the client runs."""
    jobs = _with_addresses(load(spec), "per-host commands")
    skipped = select_tasks(exclude, jobs)
    rows = []
    for task in all_tasks(jobs):
        host, port = split_address(jobs[task.job][task.index], task)
        if task in skipped:
            command = f"(no server: the client runs here and plays {task})"
        else:
            command = (
                f"python -m dtf.cluster.server --config {shlex.quote(config_name)} "
                f"--job {task.job} --task {task.index}"
            )
        rows.append({"task": str(task), "host": host, "port": str(port), "command": command})
    return rows


def tf_configs(spec) -> dict[str, str]:
    """The strategy ``TF_CONFIG`` JSON of every task of a chief, worker, ps or evaluator job,
    by task name (``"worker/1"``). Other jobs, such as the post's client job ``host``, are
    left out, of the keys and of every ``"cluster"``: the ``tf.distribute`` strategies refuse
    them ("Disallowed task type found in cluster spec", see :func:`dtf.cluster.spec.tf_config`).
    Plain servers keep the whole spec (:func:`host_commands`, ``cluster.json``)."""
    jobs = _with_addresses(load(spec), "TF_CONFIG files")
    return {str(task): tf_config(jobs, task) for task in all_tasks(strategy_jobs(jobs))}


# --------------------------------------------------------------------------- Kubernetes


def check_name(name: str) -> str:
    """``name`` if it can start every Kubernetes object name of a deployment."""
    if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name) or len(name) > 40:
        raise ClusterConfigError(
            f"name {name!r} is not valid: use lowercase letters, digits and '-', starting "
            "with a letter and ending with a letter or digit, at most 40 characters "
            "(Kubernetes builds pod host names such as NAME-worker-0 from it)."
        )
    return name


def _k8s_job_name(job: str) -> str:
    """A TensorFlow job name as part of a Kubernetes name: ``my_job`` -> ``my-job``."""
    return job.lower().replace("_", "-")


def _command(command) -> list[str]:
    if command is None:
        return list(SERVER_COMMAND)
    try:
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        raise ClusterConfigError(
            f"the container command {command!r} cannot be split into arguments ({exc}): "
            "close the quote, or escape it (\\' or \\\")."
        ) from None
    if not argv:
        raise ClusterConfigError("the container command is empty: give e.g. 'python train.py'.")
    return argv


def _gpus(gpus) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= 16:
        raise ClusterConfigError(f"gpus {gpus!r} is not a whole number from 0 to 16 (per pod).")
    return gpus


def _container(image, command, port: int, name: str, port_name: str, env=(), gpus=0) -> dict:
    gpus = _gpus(gpus)
    if image is None:
        image = DEFAULT_GPU_IMAGE if gpus else DEFAULT_IMAGE
    if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image):
        raise ClusterConfigError(f"image {image!r} is not a container image name.")
    container: dict[str, object] = {
        "name": name,
        "image": image,
        "command": _command(command),
        "ports": [{"name": port_name, "containerPort": port}],
        "env": [*env, {"name": cluster_env.GRPC_ENV, "value": cluster_env.grpc_options_value()}],
    }
    if gpus:  # a quantity: the API takes it as a string
        container["resources"] = {"limits": {GPU_RESOURCE: str(gpus)}}
    return container


def _port(port) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ClusterConfigError(f"port {port!r} is not a whole number from 1 to 65535.")
    return port


def _metadata(name: str, namespace: str | None, labels: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = check_name(namespace)
    if labels:
        meta["labels"] = labels
    return meta


def tfjob(
    spec,
    name: str = DEFAULT_NAME,
    image: str | None = None,
    command=None,
    port: int = DEFAULT_PORT,
    namespace: str | None = None,
    exclude=None,
    gpus: int = 0,
) -> dict:
    """A ``kubeflow.org/v1`` ``TFJob`` with one replica spec per job of ``spec``.

    The operator knows the jobs ``chief``, ``master``, ``worker``, ``ps`` and ``evaluator``
    (:data:`TFJOB_REPLICA_TYPES`); any other job (the post's ``host``) is a
    :class:`ClusterConfigError`: exclude it (it is the client) or rename it.
    """
    name, port = check_name(name), _port(port)
    jobs = _jobs(spec, exclude)
    unknown = [job for job in jobs if job not in TFJOB_REPLICA_TYPES]
    if unknown:
        raise ClusterConfigError(
            f"job {unknown[0]!r} has no TFJob replica type: the training operator knows only "
            f"{', '.join(TFJOB_REPLICA_TYPES)}. Leave the job out (exclude='{unknown[0]}', "
            "--exclude on the command line) if it is the client, or rename it (e.g. 'chief')."
        )
    if "chief" in jobs and "master" in jobs:
        raise ClusterConfigError(
            "a TFJob has at most one of 'chief' and 'master' (the same role): keep one."
        )
    replicas = {}
    for job, addresses in jobs.items():
        replicas[TFJOB_REPLICA_TYPES[job]] = {
            "replicas": len(addresses),
            "restartPolicy": "OnFailure",
            "template": {
                "metadata": {"labels": {CLUSTER_LABEL: name, JOB_LABEL: _k8s_job_name(job)}},
                "spec": {
                    "containers": [
                        _container(
                            image, command, port, TFJOB_CONTAINER, TFJOB_PORT_NAME, gpus=gpus
                        )
                    ]
                },
            },
        }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": _metadata(name, namespace, {CLUSTER_LABEL: name}),
        # cleanPodPolicy Running: when the job ends (chief or worker 0 done), delete the pods
        # still running, the parameter servers among them, which never exit by themselves.
        "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": replicas},
    }


def pod_dns_names(
    spec, name: str = DEFAULT_NAME, port: int = DEFAULT_PORT, exclude=None
) -> dict[str, list[str]]:
    """The cluster spec inside Kubernetes: ``worker/1`` is ``NAME-worker-1.NAME:PORT``
    (pod host name ``<Job name>-<index>``, subdomain the headless Service ``NAME``; the
    pods' DNS search path adds the namespace)."""
    name, port = check_name(name), _port(port)
    jobs = _jobs(spec, exclude)
    seen: dict[str, str] = {}
    cluster = {}
    for job, addresses in jobs.items():
        k8s = f"{name}-{_k8s_job_name(job)}"
        if k8s in seen:
            raise ClusterConfigError(
                f"jobs {seen[k8s]!r} and {job!r} both become the Kubernetes name {k8s!r}: "
                "rename one of them."
            )
        seen[k8s] = job
        longest = f"{k8s}-{len(addresses) - 1}"
        if len(longest) > _DNS_LABEL_MAX:
            raise ClusterConfigError(
                f"pod host name {longest!r} is longer than {_DNS_LABEL_MAX} characters: "
                "choose a shorter deployment name."
            )
        cluster[job] = [f"{k8s}-{i}.{name}:{port}" for i in range(len(addresses))]
    return cluster


def pod_failure_policy() -> dict:
    """The Indexed Jobs' ``podFailurePolicy`` (see :func:`indexed_jobs`, "Failures")."""
    return {
        "rules": [
            {
                # Checkpoint saved on a preemption notice: a restart resumes, no bug.
                "action": "Ignore",
                "onExitCodes": {
                    "containerName": TFJOB_CONTAINER,
                    "operator": "In",
                    "values": [PREEMPTED_EXIT_CODE],
                },
            },
            {
                # Evicted, preempted or its node drained by Kubernetes: not the pod's fault.
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
        ]
    }


def indexed_jobs(
    spec,
    name: str = DEFAULT_NAME,
    image: str | None = None,
    command=None,
    port: int = DEFAULT_PORT,
    namespace: str | None = None,
    exclude=None,
    gpus: int = 0,
) -> list[dict]:
    """The operator-free form: a headless ``Service`` and one Indexed ``Job`` per job.

    Every pod's ``TF_CONFIG`` is a strategy's (a ``--command`` training script reads it), so
    the spec may hold only chief, worker, ps and evaluator jobs, as a ``TFJob``'s: any other
    job, such as the post's client job ``host``, is a :class:`ClusterConfigError` (leave it
    out with ``exclude``). The strategies refuse it ("Disallowed task type found in cluster
    spec", see :func:`dtf.cluster.spec.tf_config`).

    Failures. Multi-worker training needs all its workers restarted together: after one
    worker fails, the others' collectives fail too (``UnavailableError``), and the survivors
    cannot go on; all must exit and resume from the last checkpoint. A Job restarts pods one
    at a time, never the group, so the pods run with ``restartPolicy: Never`` (the Job
    controller, not the kubelet, replaces a failed pod, and only then may a
    ``podFailurePolicy`` decide what the failure means). Its rules: a worker that exits with
    :data:`PREEMPTED_EXIT_CODE` saved a checkpoint on a preemption notice, and a pod with the
    ``DisruptionTarget`` condition was evicted or preempted by Kubernetes; neither is a bug,
    so both are ``Ignore``d (the pod is replaced without counting against ``backoffLimit``).
    Any other failure counts. To restart the whole group on any failure, run the same Jobs
    as a JobSet's replicated jobs (its ``failurePolicy.maxRestarts`` recreates all child
    Jobs) or under Kubeflow Trainer v2.

    There is no liveness probe: a TCP probe of the port passes while training is stuck (the
    server thread still answers), and a correct one needs the training script to report
    progress. A hung worker is therefore never restarted by these Jobs; its peers see a
    heartbeat error and fail, and the Job's ``activeDeadlineSeconds`` (add one) bounds it."""
    name, port = check_name(name), _port(port)
    jobs = _jobs(spec, exclude)
    # The job no strategy accepts first: it, not the name, is what to change (a long client
    # job's pod host name can be over 63 characters, but that pod is never made).
    other = [job for job in jobs if job not in strategy_jobs(jobs)]
    if other:
        raise ClusterConfigError(
            f"job {other[0]!r} cannot be an Indexed Job: each pod's TF_CONFIG is read by "
            f"tf.distribute strategies, which accept only the jobs {', '.join(STRATEGY_JOBS)} "
            "(TensorFlow: 'Disallowed task type found in cluster spec'). Leave the job out "
            f"(exclude='{other[0]}', --exclude on the command line) if it is the client, or "
            "rename it (e.g. 'chief')."
        )
    cluster = pod_dns_names(spec, name, port, exclude)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, {CLUSTER_LABEL: name}),
        "spec": {
            "clusterIP": "None",  # headless: a DNS record per pod, no virtual IP
            "selector": {CLUSTER_LABEL: name},
            # Records before the pods are ready: a TensorFlow task resolves its peers
            # while they are still starting.
            "publishNotReadyAddresses": True,
            "ports": [{"name": "tf", "port": port, "targetPort": port}],
        },
    }
    manifests = [service]
    for job, addresses in cluster.items():
        k8s, annotation = f"{name}-{_k8s_job_name(job)}", INDEX_ANNOTATION
        # Kubernetes expands $(TASK_INDEX) in a later variable's value: TF_CONFIG becomes
        # valid JSON with this pod's index (a whole number) in it.
        config = (
            f'{{"cluster": {json.dumps(cluster)}, '
            f'"task": {{"type": {json.dumps(job)}, "index": $({INDEX_ENV})}}}}'
        )
        env = [
            {
                "name": INDEX_ENV,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}},
            },
            {"name": "TF_CONFIG", "value": config},
        ]
        labels = {CLUSTER_LABEL: name, JOB_LABEL: _k8s_job_name(job)}
        manifests.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": _metadata(k8s, namespace, dict(labels)),
                "spec": {
                    "completionMode": "Indexed",
                    "completions": len(addresses),
                    "parallelism": len(addresses),
                    "backoffLimit": 4 * len(addresses),
                    "podFailurePolicy": pod_failure_policy(),
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "subdomain": name,
                            # Never: a failed pod is replaced by the Job controller, which
                            # applies podFailurePolicy (the API refuses it with OnFailure).
                            "restartPolicy": "Never",
                            "containers": [
                                _container(image, command, port, TFJOB_CONTAINER, "tf", env, gpus)
                            ],
                        },
                    },
                },
            }
        )
    return manifests


def expand_tf_config(value: str, index: int) -> dict:
    """What Kubernetes makes of an Indexed Job's ``TF_CONFIG`` value in the pod of ``index``."""
    return json.loads(value.replace(f"$({INDEX_ENV})", str(index)))


# --------------------------------------------------------------------------- validation


def _model_modules():
    try:
        import kubernetes.client.models as k8s_models
        from kubeflow.training import models as kubeflow_models
        from kubeflow.training.constants import constants as kubeflow_constants
    except ImportError as exc:
        raise ImportError(
            f"validating manifests needs the kubernetes and kubeflow-training packages ({exc}):"
            " pip install -r requirements.txt"
        ) from None
    return k8s_models, kubeflow_models, kubeflow_constants


_KINDS = {
    ("v1", "Service"): "V1Service",
    ("batch/v1", "Job"): "V1Job",
    ("v1", "PodTemplate"): "V1PodTemplate",
    ("kubeflow.org/v1", "TFJob"): "KubeflowOrgV1TFJob",
}
_PRIMITIVES: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "int": int,
    "float": (int, float),
    "bool": bool,
}


def _model_class(type_name: str):
    k8s_models, kubeflow_models, _ = _model_modules()
    return getattr(kubeflow_models, type_name, None) or getattr(k8s_models, type_name)


def _build(type_name: str, value, path: str, problems: list[str]):
    """``value`` as the model ``type_name``; every mismatch is appended to ``problems``."""
    if type_name.startswith("list[") and type_name.endswith("]"):
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list, got {type(value).__name__}")
            return None
        return [_build(type_name[5:-1], v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
    if type_name.startswith("dict(") and type_name.endswith(")"):
        inner = type_name[5:-1].split(",", 1)[1].strip()
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a mapping, got {type(value).__name__}")
            return None
        return {k: _build(inner, v, f"{path}.{k}", problems) for k, v in value.items()}
    if type_name == "object":  # e.g. IntOrString, Quantity
        return value
    if type_name in _PRIMITIVES:
        ok = isinstance(value, _PRIMITIVES[type_name]) and (
            type_name == "bool" or not isinstance(value, bool)
        )
        if not ok:
            problems.append(f"{path}: expected {type_name}, got {value!r}")
        return value
    if type_name == "datetime":
        return value
    cls = _model_class(type_name)
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object ({type_name}), got {type(value).__name__}")
        return None
    fields = {json_key: attr for attr, json_key in cls.attribute_map.items()}
    kwargs = {}
    for key, item in value.items():
        if key not in fields:
            near = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}?" if near else f"its fields: {', '.join(fields)}"
            problems.append(f"{path}.{key}: not a field of {type_name} ({hint})")
            continue
        attr = fields[key]
        kwargs[attr] = _build(cls.openapi_types[attr], item, f"{path}.{key}", problems)
    try:
        return cls(**kwargs)  # the model's own setters check required fields and enums
    except (ValueError, TypeError) as exc:
        problems.append(f"{path}: {exc}")
        return None


def validate(manifest: Mapping) -> None:
    """Raise :class:`ManifestError` unless ``manifest`` matches its kind's schema.

    Kinds: ``v1`` ``Service`` and ``PodTemplate``, ``batch/v1`` ``Job`` (Kubernetes API
    models) and ``kubeflow.org/v1`` ``TFJob`` (training operator SDK models, whose replica
    types and container name are checked as the operator expects them).
    """
    if not isinstance(manifest, Mapping):
        raise ManifestError(f"a manifest is a mapping, not {type(manifest).__name__}")
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    if key not in _KINDS:
        known = ", ".join(f"{a} {k}" for a, k in _KINDS)
        raise ManifestError(f"unsupported apiVersion/kind {key}: this checks {known}")
    problems: list[str] = []
    _build(_KINDS[key], dict(manifest), key[1], problems)
    if key[1] == "TFJob" and not problems:
        problems += _tfjob_rules(manifest)
    if key[1] == "Job" and not problems:
        problems += _indexed_job_rules(manifest)
    if problems:
        raise ManifestError(
            f"{key[1]} {manifest.get('metadata', {}).get('name', '?')!r} does not match the "
            f"schema: " + "; ".join(problems)
        )


def _tfjob_rules(manifest: Mapping) -> list[str]:
    # What the schema leaves open and the operator's own validation of a TFJob rejects
    # (training-operator, pkg/apis/kubeflow.org/v1 tensorflow_validation.go): a name that is
    # not a DNS-1035 label, a replica type it does not know (the map's keys are free strings
    # in the schema), a replica with no container, no image or no container named
    # "tensorflow", and more than one of Chief and Master.
    _, _, constants = _model_modules()
    known = set(TFJOB_REPLICA_TYPES.values())
    problems = []
    name = manifest.get("metadata", {}).get("name", "")
    if not _DNS_LABEL.fullmatch(name) or len(name) > _DNS_LABEL_MAX:
        problems.append(f"metadata.name: {name!r} is not a DNS-1035 label")
    specs = manifest["spec"]["tfReplicaSpecs"]
    if not specs:
        problems.append("spec.tfReplicaSpecs: no replica spec (the TFJob would run nothing)")
    for replica, spec in specs.items():
        where = f"spec.tfReplicaSpecs.{replica}"
        if spec.get("replicas") is not None and spec["replicas"] < 1:
            problems.append(f"{where}.replicas: {spec['replicas']} (a replica spec needs >= 1)")
        if replica not in known:
            problems.append(f"{where}: not a replica type ({', '.join(sorted(known))})")
        containers = spec.get("template", {}).get("spec", {}).get("containers") or []
        if not containers:
            problems.append(f"{where}: no container")
        if any(not c.get("image") for c in containers):
            problems.append(f"{where}: a container without an image")
        if containers and constants.TFJOB_CONTAINER not in [c.get("name") for c in containers]:
            problems.append(
                f"{where}: no container named {constants.TFJOB_CONTAINER!r} "
                "(the operator sets TF_CONFIG only there)"
            )
    if len({"Chief", "Master"} & set(specs)) > 1:
        problems.append("spec.tfReplicaSpecs: more than one of Chief and Master")
    return problems


def _indexed_job_rules(manifest: Mapping) -> list[str]:
    spec = manifest["spec"]
    if spec.get("completionMode") != "Indexed":
        return []
    # The API server's rules for Indexed Jobs (batch/v1 JobSpec documentation).
    problems = []
    if not isinstance(spec.get("completions"), int) or spec["completions"] < 1:
        problems.append("spec.completions: an Indexed Job needs completions >= 1")
    policy = spec["template"]["spec"].get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        problems.append(
            "spec.template.spec.restartPolicy: a Job's pods need OnFailure or Never, "
            f"not {policy!r}"
        )
    if spec.get("podFailurePolicy") is not None and policy != "Never":
        problems.append("spec.podFailurePolicy: needs spec.template.spec.restartPolicy Never")
    return problems


# --------------------------------------------------------------------------- files


def _yaml(documents: Sequence[Mapping]) -> str:
    import yaml

    return yaml.safe_dump_all(list(documents), sort_keys=False, width=100)


def write(
    spec,
    out: str | Path,
    name: str = DEFAULT_NAME,
    image: str | None = None,
    command=None,
    port: int = DEFAULT_PORT,
    namespace: str | None = None,
    exclude=None,
    check: bool = False,
    gpus: int = 0,
) -> tuple[list[Path], list[str]]:
    """Write the deployment files of ``spec`` into ``out``; returns (paths written, one line
    for each part left out and why). ``check``: validate the manifests first."""
    try:
        jobs = load(spec)  # every mistake of the file is one ClusterConfigError, here
    except UnicodeDecodeError as exc:
        raise ClusterConfigError(
            f"cluster file {str(spec)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}):"
            " save it as UTF-8 (PowerShell: Set-Content -Encoding utf8)."
        ) from None
    _check_not_empty(jobs, exclude)  # never an empty deployment
    _check_whole_jobs(jobs, exclude)  # never part of a job's tasks
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(
            f"--out {str(out)!r} is a file, not a folder: name a folder (it is created if "
            "missing), e.g. --out build/deploy."
        )
    # Mistakes of the arguments fail here, before any file is written, whatever the spec.
    check_name(name)
    if namespace:
        check_name(namespace)
    _port(port)
    _container(image, command, port, TFJOB_CONTAINER, TFJOB_PORT_NAME, gpus=gpus)
    written: list[Path] = []
    skipped: list[str] = []
    k8s_args = dict(
        name=name, image=image, command=command, port=port, namespace=namespace, gpus=gpus
    )

    def put(relative: str, text: str) -> None:
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    manifests: dict[str, list[dict]] = {}
    try:
        manifests["kubernetes/tfjob.yaml"] = [tfjob(spec, exclude=exclude, **k8s_args)]
    except ClusterConfigError as exc:
        skipped.append(f"kubernetes/tfjob.yaml: {exc}")
    try:
        manifests["kubernetes/indexed-jobs.yaml"] = indexed_jobs(spec, exclude=exclude, **k8s_args)
    except ClusterConfigError as exc:
        skipped.append(f"kubernetes/indexed-jobs.yaml: {exc}")
    if check and not manifests:
        # The first reason is enough to say what to change (usually both name the same job).
        raise ManifestError(f"--check: no manifest to check, none can be written: {skipped[0]}")
    try:
        rows: list[dict[str, str]] | None = host_commands(spec, exclude=exclude)
        configs = tf_configs(spec)
    except ClusterConfigError as exc:
        skipped.append(f"hosts.txt and tf_config/: {exc}")
        rows, configs = None, {}
    if not manifests and rows is None:
        # Only cluster.json, a copy of the input, would be written: no deployment at all.
        raise ClusterConfigError(
            f"no deployment file can be written, only a copy of the cluster file: {skipped[0]}"
            f" And {skipped[-1]}"
        )
    if check:
        for documents in manifests.values():
            for manifest in documents:
                validate(manifest)
    earlier = _recorded(out)
    counted = {job: a if None not in a else len(a) for job, a in jobs.items()}
    put("cluster.json", json.dumps(counted, indent=2) + "\n")
    if rows is not None:
        put("hosts.txt", _hosts_text(rows))
        for task, value in configs.items():
            put(f"tf_config/{task.replace('/', '-')}.json", value + "\n")
    for relative, documents in manifests.items():
        put(relative, _yaml(documents))
    # Files an earlier run wrote and this one does not would mislead: remove them, and only
    # them (never a file this tool did not record writing, such as a user's own TF_CONFIG).
    now = {path.relative_to(out).as_posix() for path in written}
    for relative in sorted(set(earlier) - now):
        stale = out / relative
        if not (stale.is_file() or stale.is_symlink()):
            continue
        stale.unlink()
        for folder in stale.parents:  # the folders it emptied, up to out
            if folder == out or not folder.is_relative_to(out):
                break
            try:
                folder.rmdir()
            except OSError:  # not empty: someone else's files are there
                break
    (out / RECORD).write_text(
        f"# {RECORD}: the files python -m dtf.deploy wrote here, one a line; its next run\n"
        "# deletes those it no longer writes, and no other file.\n" + "\n".join(sorted(now)) + "\n",
        encoding="utf-8",
    )
    return written, skipped


def _recorded(out: Path) -> list[str]:
    """The files an earlier run recorded writing into ``out`` (relative, inside ``out``)."""
    try:
        text = (out / RECORD).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    files = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        relative = PurePosixPath(line)
        if relative.is_absolute() or ".." in relative.parts or relative.name == RECORD:
            continue  # a record edited by hand never reaches outside out
        files.append(relative.as_posix())
    return files


def _hosts_text(rows: list[dict[str, str]]) -> str:
    lines = [
        "# Generated by python -m dtf.deploy. On each machine, in a checkout of the course",
        "# with cluster.json copied beside it, run that machine's command. Let a firewall admit",
        "# only the cluster's machines to these ports: a TensorFlow server runs any graph sent",
        "# to it, unauthenticated.",
    ]
    for row in rows:
        lines += ["", f"## {row['task']} on {row['host']} (port {row['port']})", row["command"]]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command_name("dtf-deploy", "dtf.deploy"),
        description="Per-host commands, TF_CONFIG files and Kubernetes manifests "
        "from one cluster file.",
    )
    parser.add_argument("cluster", help="the cluster file, e.g. clusters/host_two_workers.json")
    parser.add_argument("--out", default="build/deploy", help="folder to write (build/deploy)")
    parser.add_argument("--name", default=DEFAULT_NAME, help=f"Kubernetes name ({DEFAULT_NAME})")
    parser.add_argument("--namespace", help="Kubernetes namespace (default: kubectl's)")
    parser.add_argument(
        "--image", help=f"container image ({DEFAULT_IMAGE}; with --gpus {DEFAULT_GPU_IMAGE})"
    )
    parser.add_argument("--gpus", type=int, default=0, help="GPUs per pod (0)")
    parser.add_argument("--command", help="container command (default: a TensorFlow server)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="pods' port (2222)")
    parser.add_argument(
        "--exclude", action="append", help="a job that gets no server (the client), e.g. host"
    )
    parser.add_argument(
        "--check", action="store_true", help="validate the manifests against their schemas"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        written, skipped = write(
            args.cluster,
            args.out,
            name=args.name,
            image=args.image,
            gpus=args.gpus,
            command=args.command,
            port=args.port,
            namespace=args.namespace,
            exclude=args.exclude,
            check=args.check,
        )
    except (ClusterConfigError, ManifestError) as exc:
        print(f"dtf.deploy: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # --out is a file, or a folder that cannot be written
        if exc.errno is None:  # write's own message
            print(f"dtf.deploy: {exc}", file=sys.stderr)
        else:
            print(
                f"dtf.deploy: cannot write {str(exc.filename or args.out)!r}: {exc.strerror}: "
                "choose another --out folder.",
                file=sys.stderr,
            )
        return 2
    for path in written:
        print(f"wrote {path}")
    for line in skipped:
        print(f"not written: {line}")
    if args.check:
        print("manifests valid (Kubernetes API models, Kubeflow training SDK models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
