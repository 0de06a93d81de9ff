"""``python -m dtf.deploy`` on the failure paths (issue 19): it never writes an empty
deployment, deletes only the files it recorded writing, and turns every mistake of its
input into exit 2 with one line, never a traceback. In-process: each test calls ``main``."""

from __future__ import annotations

import json

import pytest

from dtf import deploy
from dtf.cluster import ClusterConfigError

from .helpers import ROOT

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


# --------------------------------------------------------------------------- what --out deletes


def test_a_later_run_deletes_only_the_files_it_recorded_writing(tmp_path, capsys):
    out = tmp_path / "out"
    mine = out / "tf_config" / "mine.json"  # the user's own, beside the generated ones
    mine.parent.mkdir(parents=True)
    mine.write_text('{"mine": true}\n')
    notes = out / "kubernetes" / "notes.yaml"
    notes.parent.mkdir()
    notes.write_text("kind: Notes\n")
    assert deploy.main([str(POST), "--out", str(out), "--exclude", "host"]) == 0
    record = (out / deploy.RECORD).read_text().splitlines()
    assert [line for line in record if not line.startswith("#")] == [
        "cluster.json",
        "hosts.txt",
        "kubernetes/indexed-jobs.yaml",
        "kubernetes/tfjob.yaml",
        "tf_config/worker-0.json",
        "tf_config/worker-1.json",
    ]
    # Counts only: no hosts.txt and no TF_CONFIG files this time.
    counts = tmp_path / "counts.json"
    counts.write_text('{"worker": 2}')
    assert deploy.main([str(counts), "--out", str(out)]) == 0
    capsys.readouterr()
    assert not (out / "hosts.txt").exists()
    assert sorted(p.name for p in (out / "tf_config").iterdir()) == ["mine.json"]
    assert mine.read_text() == '{"mine": true}\n' and notes.is_file()
    # A run that writes no manifests removes the generated ones and the emptied folder only.
    notes.unlink()
    assert deploy.main([str(POST), "--out", str(out)]) == 0
    assert not (out / "kubernetes").exists()
    assert mine.is_file()
    assert sorted(p.name for p in (out / "tf_config").iterdir()) == [
        "mine.json",
        "worker-0.json",
        "worker-1.json",
    ]


def test_a_record_edited_by_hand_never_reaches_outside_out(tmp_path, capsys):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tf_config").mkdir()
    (out / deploy.RECORD).write_text(
        f"../precious.txt\n{outside}\ntf_config\nkubernetes/../../precious.txt\n"
    )
    assert deploy.main([str(POST), "--out", str(out), "--exclude", "host"]) == 0
    capsys.readouterr()
    assert outside.read_text() == "keep" and (out / "tf_config").is_dir()


# --------------------------------------------------------------------------- one line, exit 2


def test_an_unbalanced_quote_in_the_command_is_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    argv = [POST, "--out", out, "--exclude", "host", "--command", 'python train.py --msg "hi']
    _refused(capsys, argv, "No closing quotation): close the quote")
    assert not out.exists()  # refused before anything is written
    with pytest.raises(ClusterConfigError, match="cannot be split"):
        deploy.tfjob({"worker": 1}, command="python 'x")


def test_out_naming_a_file_is_one_line(tmp_path, capsys):
    afile = tmp_path / "deploy.txt"
    afile.write_text("mine")
    _refused(capsys, [POST, "--out", afile], "is a file, not a folder: name a folder")
    _refused(capsys, [POST, "--out", afile / "sub"], "Not a directory: choose another --out")
    assert afile.read_text() == "mine"


@pytest.mark.parametrize(
    "data",
    [
        '{"worker": ["h\u00e9te:2222"]}'.encode("latin-1"),
        '{"worker": ["127.0.0.1:2222"]}'.encode("utf-16"),  # PowerShell 5's '>'
    ],
    ids=["latin-1", "utf-16"],
)
def test_a_cluster_file_that_is_not_utf8_is_one_line(tmp_path, capsys, data):
    bad = tmp_path / "cluster.json"
    bad.write_bytes(data)
    line = _refused(capsys, [bad, "--out", tmp_path / "out"], "cluster.json")
    assert "UTF-8" in line or "utf-8" in line
    assert not (tmp_path / "out").exists()


def test_bad_kubernetes_arguments_are_refused_before_any_file(tmp_path, capsys):
    out = tmp_path / "out"
    _refused(capsys, [POST, "--out", out, "--name", "Bad_Name"], "is not valid")
    _refused(capsys, [POST, "--out", out, "--gpus", "99"], "gpus 99")
    assert not out.exists()


def test_check_with_no_manifest_to_check_is_no_success(tmp_path, capsys):
    # The post's file keeps its client job 'host': neither manifest can be written, so
    # "manifests valid" would be a lie.
    line = _refused(capsys, [POST, "--out", tmp_path / "out", "--check"], "no manifest to check")
    assert "exclude='host'" in line
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- partial refusals
# Issue 26: each of these exited 0 with only part of the deployment written, or nothing
# but a copy of the cluster file, the reason on stdout among "not written" lines.


@pytest.mark.parametrize(
    "spec, exclude, task",
    [
        (POST, ["worker/0"], "worker/0"),
        (POST, ["host", "worker/1"], "worker/1"),
        ({"chief": 1, "worker": 3, "ps": 1}, ["worker:2"], "worker/2"),
        ({"chief": 1, "worker": 2, "ps": 2}, ["ps/0"], "ps/0"),
    ],
)
def test_an_exclude_naming_only_some_tasks_of_a_job_is_refused_before_any_file(
    tmp_path, capsys, spec, exclude, task
):
    if isinstance(spec, dict):
        (tmp_path / "c.json").write_text(json.dumps(spec))
        spec = tmp_path / "c.json"
    argv = [spec, "--out", tmp_path / "out"]
    for item in exclude:
        argv += ["--exclude", item]
    job = task.split("/")[0]
    line = _refused(capsys, argv, f"names only some tasks of job {job!r} ({task}")
    assert "whole jobs only" in line and "--exclude host" in line  # what to do instead
    assert not (tmp_path / "out").exists()


def test_a_run_that_could_write_only_a_copy_of_the_cluster_file_is_refused(tmp_path, capsys):
    # Counts only (no hosts.txt, no TF_CONFIG) and a job no manifest accepts: neither
    # manifest, so the "deployment" would be cluster.json alone. With a long --name the
    # job's pod host name is also over Kubernetes' 63 characters, but the job is what to
    # change: left out, the same name deploys.
    client = "parameter_server_client_job"
    (tmp_path / "c.json").write_text(json.dumps({"worker": 2, client: 1}))
    name = "n" * 40
    assert len(f"{name}-{client.replace('_', '-')}-0") > 63
    out = tmp_path / "out"
    line = _refused(
        capsys, [tmp_path / "c.json", "--out", out, "--name", name], "no deployment file"
    )
    assert f"exclude='{client}'" in line and "longer than 63" not in line
    assert not out.exists()
    assert deploy.main([str(tmp_path / "c.json"), "--out", str(out), "--name", name,
                        "--exclude", client, "--check"]) == 0  # fmt: skip
    assert (out / "kubernetes" / "indexed-jobs.yaml").is_file()


def test_indexed_jobs_name_the_job_no_strategy_accepts_before_its_host_name_length():
    spec = {"worker": 2, "parameter_server_client_job": 1}
    with pytest.raises(ClusterConfigError, match="cannot be an Indexed Job"):
        deploy.indexed_jobs(spec, name="n" * 40)
    with pytest.raises(ClusterConfigError, match="longer than 63 characters"):
        deploy.pod_dns_names(spec, name="n" * 40)  # every job, as lab 07 asks for
