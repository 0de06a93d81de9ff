"""``python -m dtf.deploy`` on the failure paths (issue 19): it never writes an empty
deployment, deletes only the files it recorded writing, and turns every mistake of its
input into exit 2 with one line, never a traceback. In-process: each test calls ``main``."""

from __future__ import annotations

import json

import pytest

from dtf import deploy
from dtf.cluster import ClusterConfigError

from .conftest import ROOT

POST = ROOT / "clusters" / "host_two_workers.json"


def _refused(capsys, argv, message: str) -> str:
    """``main(argv)`` exits 2 with one line on stderr, containing ``message``, and prints
    nothing on stdout."""
    assert deploy.main([str(a) for a in argv]) == 2
    printed = capsys.readouterr()
    lines = printed.err.strip().splitlines()
    assert printed.out == "" and len(lines) == 1, printed
    assert lines[0].startswith("dtf.deploy: ") and message in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- empty deployments


@pytest.mark.parametrize(
    "spec, exclude, message",
    [
        ({"worker": 2}, ["worker"], "leaves out every task (worker)"),
        (POST, ["host", "worker"], "leaves out every task (host, worker)"),
        (POST, ["worker"], "every task of 'worker': no task would train"),
        ({"chief": 1, "worker": 2, "ps": 1}, ["chief", "worker"], "no task would train"),
        (POST, ["worker/0", "worker/1"], "every task of 'worker'"),
    ],
)
def test_an_empty_deployment_is_refused_and_nothing_is_written(
    tmp_path, capsys, spec, exclude, message
):
    if isinstance(spec, dict):
        (tmp_path / "c.json").write_text(json.dumps(spec))
        spec = tmp_path / "c.json"
    argv = [spec, "--out", tmp_path / "out", "--check"]
    for item in exclude:
        argv += ["--exclude", item]
    line = _refused(capsys, argv, message)
    assert "--exclude host" in line  # what to do
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_empty_deployments_too():
    for make in (deploy.tfjob, deploy.indexed_jobs, deploy.pod_dns_names):
        with pytest.raises(ClusterConfigError, match="deployment would be empty"):
            make({"worker": 2}, exclude="worker")


def test_validate_refuses_a_tfjob_with_no_replicas():
    manifest = deploy.tfjob({"worker": 2})
    deploy.validate(manifest)
    empty = {**manifest, "spec": {**manifest["spec"], "tfReplicaSpecs": {}}}
    with pytest.raises(deploy.ManifestError, match="no replica spec"):
        deploy.validate(empty)
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 0
    with pytest.raises(deploy.ManifestError, match="Worker.replicas: 0"):
        deploy.validate(manifest)
