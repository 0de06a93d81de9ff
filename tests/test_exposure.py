"""Servers that say they are reachable, and a mitigation that works (issue 19, item 1).

- ``LocalCluster.start()`` warns once per process (:class:`ExposureWarning`, naming the ports),
  and its servers really listen on every interface, whatever the spec says.
- ``python -m dtf.cluster.server`` warns too and says what a client must do so that a TF1
  session does not wait forever (play ``host/0``, or ``device_filters``).
- As root: an "outside" host (a network namespace wired to this machine) runs an op in a plain
  ``LocalCluster`` through this machine's address, and cannot reach a ``dtf.netns.private_cluster``,
  whose servers this machine still reaches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

from dtf import netns, supervise
from dtf.cluster import GRPC_ENV, LocalCluster, exposure, grpc_options_value
from dtf.cluster.exposure import ExposureWarning, firewall_rules, listening
from dtf.netns import private_cluster

from .helpers import QUIET_ENV, ROOT, netns_cli

REASON = netns.unavailable_reason()
REQUIRED = os.environ.get("DTF_REQUIRE_NETNS") == "1"
READY_S = 120.0
WILDCARD = {"0.0.0.0", "::"}


@pytest.fixture
def fresh_warning(monkeypatch):
    """As if this process had not warned yet."""
    monkeypatch.setattr(exposure, "_warned", False)


def test_the_warning_comes_once_per_process_and_names_the_ports(fresh_warning):
    with pytest.warns(ExposureWarning, match=r"ports 2222, 2223 listen on every interface"):
        assert exposure.warn_exposed([2223, 2222], "here")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise
        assert not exposure.warn_exposed([2224])
    assert not exposure.warn_exposed([])


def test_a_notebook_can_silence_it(fresh_warning):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=ExposureWarning)
        exposure.warn_exposed([2222])
    assert not caught


def test_firewall_rules_drop_all_but_loopback_and_undo_themselves():
    rules = firewall_rules(range(2222, 2240))  # 18 ports: two multiport rules per family
    assert len(rules["add"]) == 4 and len(rules["remove"]) == 4
    assert rules["add"][0] == (
        "iptables -I INPUT ! -i lo -p tcp -m multiport --dports "
        + ",".join(map(str, range(2222, 2237)))
        + " -j DROP"
    )
    assert [r.replace(" -D ", " -I ") for r in rules["remove"]] == rules["add"]
    nft = firewall_rules([2223, 2222], "nft")
    assert (
        nft["add"][-1] == "nft add rule inet dtf input iifname != lo tcp dport { 2222, 2223 } drop"
    )
    with pytest.raises(ValueError):
        firewall_rules([2222], "ufw")


@pytest.mark.slow
def test_start_warns_once_applies_keepalive_and_its_servers_listen_everywhere(
    fresh_warning, monkeypatch
):
    monkeypatch.delenv(GRPC_ENV, raising=False)
    with pytest.warns(ExposureWarning) as caught:
        with LocalCluster({"worker": 2}, ready_timeout=READY_S) as cluster:
            ports = cluster.ports
            where = listening(ports)
            applied = os.environ.get(GRPC_ENV)
    assert len(caught) == 1 and all(str(p) in str(caught[0].message) for p in ports)
    assert caught[0].filename == __file__  # points at the caller's line
    assert all(where[p] and set(where[p]) <= WILDCARD for p in ports), where
    assert applied == grpc_options_value()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with LocalCluster({"worker": 1}, ready_timeout=READY_S):  # once per process
            pass


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_command_line_server_warns_and_says_what_a_client_must_do():
    from dtf.cluster import free_ports

    worker, host = free_ports(2)
    spec = {"host": [f"127.0.0.1:{host}"], "worker": [f"127.0.0.1:{worker}"]}
    env = {**os.environ, **QUIET_ENV}
    env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dtf.cluster.server", "--cluster-json", json.dumps(spec)]
        + ["--job", "worker"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline and not any("clients:" in ln for ln in lines):
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
    finally:
        supervise.stop_processes([proc.pid], grace=20)  # SIGTERM, then SIGKILL
        proc.stderr.close()
    text = "".join(lines)
    warned = "ExposureWarning: python -m dtf.cluster.server: the TensorFlow server on port"
    assert warned in text, text
    hint = next(ln for ln in lines if "clients:" in ln)
    assert "host/0" in hint and "device_filters=['/job:worker']" in hint


# --------------------------------------------------------------------------- as root


def needs_root(test):
    skip = pytest.mark.skipif(REASON is not None and not REQUIRED, reason=f"dtf.netns: {REASON}")
    return pytest.mark.root(pytest.mark.slow(skip(test)))


#: Run in a host: does the server at ADDRESS answer, and if so run an op on it (as worker/0).
OUTSIDER = textwrap.dedent(
    """
    import json, os, sys
    from dtf.cluster import answers
    address = sys.argv[1]
    if not answers(address, timeout=3):
        print(json.dumps({"answers": False}))
        os._exit(0)
    from dtf.cluster.server import import_tensorflow
    tf = import_tensorflow()
    tf.config.experimental_connect_to_host(address, job_name="worker")
    with tf.device("/job:worker/task:0"):
        value = tf.strings.join(["ran on ", tf.constant(address)])
    print(json.dumps({"answers": True, "ran": value.numpy().decode()}))
    os._exit(0)
    """
)


def _client_env() -> dict:
    env = {**os.environ, **QUIET_ENV, "GRPC_VERBOSITY": "ERROR"}
    env.pop("PYTEST_CURRENT_TEST", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def _outsider(hosts, address: str) -> dict:
    argv = [sys.executable, "-c", OUTSIDER, address]
    if hosts is None:  # from this machine
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=_client_env(), cwd=ROOT
        )
    else:
        done = hosts.run(
            "outside",
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            env=_client_env(),
            cwd=ROOT,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_root
@pytest.mark.timeout(300)
def test_an_outside_host_runs_ops_in_a_plain_cluster_but_not_in_a_private_one(fresh_warning):
    with netns.Hosts(["outside"]) as outside:  # another machine, wired to this one
        here = outside.bridge_address  # this machine's address, as the outside host sees it
        with pytest.warns(ExposureWarning):
            plain = LocalCluster({"worker": 1}, ready_timeout=READY_S).start()
        with plain:
            port = plain.ports[0]
            got = _outsider(outside, f"{here}:{port}")  # the spec says 127.0.0.1
            assert got == {"answers": True, "ran": f"ran on {here}:{port}"}, got

        with warnings.catch_warnings():
            warnings.simplefilter("error", ExposureWarning)  # nothing exposed: no warning
            exposure._warned = False
            with private_cluster({"worker": 1}, ready_timeout=READY_S) as private:
                address = private.address("worker/0")
                private_port = int(address.rsplit(":", 1)[1])
                assert listening([private_port])[private_port] == []  # not on this machine's
                blocked = [
                    _outsider(outside, f"{here}:{private_port}"),  # this machine's address
                    _outsider(outside, address),  # the private address: no route there
                ]
                mine = _outsider(None, address)  # this machine still reaches it
                namespaces = [private.hosts.namespace(n) for n in private.hosts.names]
    assert blocked == [{"answers": False}, {"answers": False}], blocked
    assert mine == {"answers": True, "ran": f"ran on {address}"}, mine
    assert not set(namespaces) & set(netns.namespaces())  # nothing left behind


@needs_root
@pytest.mark.timeout(120)
def test_netns_up_warns_once_and_says_what_a_client_must_do():
    tag = f"x{os.getpid() % 10**6}"

    up = netns_cli("up", "--tag", tag)
    try:
        assert up.returncode == 0, up.stderr
        assert (
            up.stderr.count("ExposureWarning: python -m dtf.netns up: the TensorFlow server") == 1
        )
        assert "other machines cannot" in up.stderr and "netns.py:" in up.stderr  # not runpy
        hint = next(ln for ln in up.stdout.splitlines() if ln.startswith("clients:"))
        assert "Play host/0" in hint and "device_filters=['/job:worker']" in hint
    finally:
        down = netns_cli("down", "--tag", tag)
    assert down.returncode == 0 and f"dtf-{tag}-host" in down.stdout
    assert not [n for n in netns.namespaces() if f"-{tag}-" in n]
