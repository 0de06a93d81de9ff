"""Tests for ``dtf.netns``: hosts as network namespaces, real servers in them, cut links.

The post's layout on three hosts of a private /24: ``host`` (the client), ``worker0`` and
``worker1``, each task at its own address and port 2222. Servers start in the workers through
``LocalCluster(command_prefix=...)``; clients run in the ``host`` namespace as subprocesses,
so a client that hangs can be bounded and killed. The clients are notebook 13's own programs,
``python -m dtf.lessons.<name>`` (written into the package from the notebook's cells by
``python -m tools.export``): the tests check the code the learner reads. Clients run at
the same time where they can (each imports TensorFlow), and the longest wait is the one that
shows a hung client (docs/measurements.md has what the suites take).

Without root or without ``ip`` the tests that need them skip with one reason; the pure checks
(subnet picking, names, ``command_prefix`` validation) run everywhere.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from dtf import netns
from dtf.cluster import (
    GRPC_ENV,
    ClusterConfigError,
    LocalCluster,
    PortInUseError,
    Task,
    answers,
    grpc_options_value,
)

from .helpers import QUIET_ENV, ROOT, netns_cli, processes_gone

pytestmark = pytest.mark.timeout(180)
REASON = netns.unavailable_reason()


def needs_root(test):
    """Marked ``root`` (``make test`` leaves it out, ``make check`` runs it) and skipped with
    the reason where namespaces cannot be made."""
    skip = pytest.mark.skipif(REASON is not None, reason=f"dtf.netns: {REASON}")
    return pytest.mark.root(skip(test))


#: Set by .ci/run when it runs as root: there these tests must run, never skip.
REQUIRED = os.environ.get("DTF_REQUIRE_NETNS") == "1"
#: Notebook 13's programs, generated from its cells: ``python -m PROGRAMS.<name> ARGS``.
PROGRAMS = "dtf.lessons"
#: The bound the issue sets for a cut link to become an error.
ERROR_WITHIN_S = 10.0
#: How long the client without keepalive must still be waiting after the cut.
HANG_S = ERROR_WITHIN_S
#: How long that client may take to go on once the link is back (TCP's retransmission timer
#: has backed off to a few seconds by then).
RESUME_S = 30.0
RUN_TIMEOUT_MS = 2000
READY_S = 90.0
PRODUCT = [[22.0, 28.0], [49.0, 64.0]]  # the 2x3 . 3x2 matmul of the post


# --------------------------------------------------------------------------- everywhere


def test_without_root_or_ip_there_is_one_clear_reason(monkeypatch):
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)
    assert netns.unavailable_reason() == (
        "the `ip` command (iproute2) is not installed: e.g. apt-get install iproute2"
    )
    monkeypatch.undo()
    monkeypatch.setattr(netns.shutil, "which", lambda name: "/usr/sbin/ip")
    monkeypatch.setattr(netns, "_capabilities", lambda: 1 << netns._CAP_NET_ADMIN)
    reason = netns.unavailable_reason()
    assert reason.startswith("needs root: network namespaces and links need CAP_SYS_ADMIN")
    with pytest.raises(netns.NetnsUnavailable, match="^needs root") as info:
        netns.Hosts().up()  # refused before anything is made
    assert "\n" not in str(info.value)
    monkeypatch.setattr(netns.sys, "platform", "darwin")
    assert netns.unavailable_reason() == "network namespaces need Linux; this is darwin"


def test_a_hosted_runtime_is_named_in_the_reason(monkeypatch):
    """Colab and Kaggle run notebooks as root in a container that cannot make namespaces:
    the skip line says so, instead of a puzzling "needs root" to a process whose uid is 0."""
    monkeypatch.setattr(netns.shutil, "which", lambda name: "/usr/sbin/ip")
    monkeypatch.setattr(netns, "_capabilities", lambda: 0)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    reason = netns.unavailable_reason()
    assert reason.startswith("Kaggle runs notebooks in a container without the capabilities")
    assert "CAP_NET_ADMIN" in reason and "dev container" in reason and "\n" not in reason
    monkeypatch.setattr(netns, "_capabilities", lambda: -1)  # every capability: no reason
    assert netns.unavailable_reason() is None
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)  # what root can fix there
    assert netns.unavailable_reason().startswith("the `ip` command (iproute2) is not installed")


def test_a_free_private_24_is_picked():
    net = ipaddress.ip_network
    taken = [net("192.0.2.0/24"), net("10.213.0.0/24"), net("10.213.1.7/32")]
    assert netns.pick_subnet(taken) == net("10.213.2.0/24")
    with pytest.raises(netns.NetnsError, match="every candidate /24"):
        netns.pick_subnet([net("10.0.0.0/8")])
    assert netns.check_subnet("192.168.77.0/24") == net("192.168.77.0/24")
    for wrong in ("10.1.0.0/16", "8.8.8.0/24", "172.16.0.0/24", "fd00::/120", "nonsense"):
        with pytest.raises(ValueError, match="subnet"):
            netns.check_subnet(wrong)


def test_host_names_tags_and_the_names_of_what_is_made():
    for wrong in ([], ["Worker"], ["a b"], ["x" * 17], ["w", "w"], ["h"] * 10):
        with pytest.raises(ValueError, match="host name|host names|give 1"):
            netns.Hosts(wrong)
    for wrong in ("Cli", "1abc", "abcdefghi", "a-b", ""):
        with pytest.raises(ValueError, match="tag"):
            netns.Hosts(tag=wrong)
    assert [netns.job_of(h) for h in netns.DEFAULT_HOSTS] == ["host", "worker", "worker"]
    assert netns.job_of("ps0") == "ps"
    # Interface names hold at most 15 characters; every name maps back to its tag.
    links = {
        "dtfb4194304z": "4194304z",
        "dtfv4194304zx8": "4194304z",
        "dtfbax1": "ax1",  # a kept tag may end like a cable's suffix
        "dtfvax1x0": "ax1",
        "dtfvclix2": "cli",
    }
    for name, tag in links.items():
        match = netns._LINK_NAME.match(name)
        assert len(name) <= 15 and (match["bridge"] or match["cable"]) == tag
    for name in ("eth0", "dtfvcli", "dtfb4711", "dtfv4711ax", "dtfbToolong123"):
        assert not netns._LINK_NAME.match(name)
    assert netns._NS_NAME.match("dtf-4711a-worker0")["tag"] == "4711a"
    assert netns._NS_NAME.match("dtf-lab1-ps0")["tag"] == "lab1"


def test_listening_sockets_are_read_from_proc():
    tcp = (
        "  sl  local_address rem_address   st tx_queue rx_queue\n"
        "   0: 00000000:08AE 00000000:0000 0A 00000000:00000000\n"  # 0.0.0.0:2222, LISTEN
        "   1: 0100007F:08AF 00000000:0000 0A 00000000:00000000\n"  # 127.0.0.1:2223
        "   2: 0B00D50A:08AE 0C00D50A:9C40 01 00000000:00000000\n"  # established: not listed
    )
    assert netns._listening(tcp, None) == ["0.0.0.0:2222", "127.0.0.1:2223"]
    assert netns._listening(tcp, 2223) == ["127.0.0.1:2223"]
    tcp6 = "header\n   0: 00000000000000000000000000000000:08AE 0000 0A 0\n"
    assert netns._listening(tcp6, 2222) == ["[::]:2222"]


def test_command_prefix_is_checked_before_anything_starts():
    remote = {"host": ["10.9.9.11:2222"], "worker": ["10.9.9.12:2222", "10.9.9.13:2222"]}
    ns = {"worker/0": ["ip", "netns", "exec", "a"], "worker/1": ["ip", "netns", "exec", "b"]}
    # Addresses of other hosts and a shared port are fine under prefixes: they run elsewhere.
    cluster = LocalCluster(remote, exclude="host", command_prefix=ns)
    assert cluster.start_method == "spawn" and not cluster.running
    with pytest.raises(ClusterConfigError, match="not this machine"):
        LocalCluster(remote, exclude="host", command_prefix={"worker/0": ns["worker/0"]})
    with pytest.raises(ClusterConfigError, match="both use port 2222 under the command prefix"):
        LocalCluster(remote, exclude="host", command_prefix={"worker": ["ip", "netns", "x"]})
    with pytest.raises(ClusterConfigError, match="needs start_method='spawn'"):
        LocalCluster(remote, exclude="host", command_prefix=ns, start_method="fork")
    with pytest.raises(ClusterConfigError, match="has a command_prefix but no address"):
        LocalCluster({"worker": 1}, command_prefix={"worker/0": ["env"]})
    for wrong in ("ip netns exec a", [], ["ip", ""], [1]):
        with pytest.raises(ClusterConfigError, match="non-empty list of strings"):
            LocalCluster(remote, exclude="host", command_prefix={"worker": wrong})
    with pytest.raises(ClusterConfigError, match="must be a dict"):
        LocalCluster(remote, exclude="host", command_prefix=["ip"])
    with pytest.raises(ClusterConfigError, match="unknown job 'wroker'"):
        LocalCluster(remote, exclude="host", command_prefix={"wroker": ["env"]})


# --------------------------------------------------------------------------- helpers


def _client_env() -> dict:
    env = {**os.environ, **QUIET_ENV, "GRPC_VERBOSITY": "ERROR"}
    for name in (GRPC_ENV, "PYTEST_CURRENT_TEST", "TF_CONFIG"):
        env.pop(name, None)  # no keepalive unless the client asks for it
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


class Client:
    """One of notebook 13's programs as a process in a host; its output arrives on a thread,
    one JSON object per line. A line without an ``event`` (the one line a program that runs to
    its end prints) is a ``result``, timed when it arrived."""

    def __init__(self, hosts, host: str, program: str, args: list[str], log: Path):
        self.name, self.log = f"{program} in {host}", log
        self.started = time.monotonic()
        with open(log, "wb") as stderr:
            self.proc = hosts.popen(
                host,
                [sys.executable, "-m", f"{PROGRAMS}.{program}", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=_client_env(),
                cwd=ROOT,
                start_new_session=True,
            )
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            if "event" not in event:
                event = {"event": "result", "t": time.monotonic(), **event}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "exit"})
            self._cond.notify_all()

    def first(self, wanted, timeout: float) -> dict | None:
        """The first event for which ``wanted(event)`` is true, or ``None`` after ``timeout``
        seconds or once the client has exited."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if wanted(e)]
                if found:
                    return found[0]
                if self.proc.poll() is not None or time.monotonic() >= deadline:
                    return None
                self._cond.wait(0.1)

    def wait_for(self, kind: str, timeout: float) -> dict:
        """The first event of ``kind``; fails, with the client's log, after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if e["event"] == kind]
                if found:
                    return found[0]
                if any(e["event"] == "exit" for e in self.events):
                    break
                if time.monotonic() >= deadline:
                    break
                self._cond.wait(0.1)
        self.kill()
        pytest.fail(f"client {self.name}: no {kind!r} event within {timeout} s:{self.tail()}")

    def of(self, kind: str) -> list[dict]:
        with self._cond:
            return [e for e in self.events if e["event"] == kind]

    def tail(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        lines = [ln for ln in text.splitlines() if ln.strip()][-15:]
        return "\n" + "\n".join(lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: it and nothing else
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        self._reader.join(5)


def _nothing_of(tag: str) -> None:
    """No namespace and no interface of ``tag`` (``ours`` parses every name exactly)."""
    assert tag not in netns.ours()
    assert not [n for n in netns.namespaces() if n.startswith(f"{netns.NS_PREFIX}{tag}-")]


@pytest.mark.root
def test_namespace_tests_run_where_ci_requires_them():
    """CI runs as root and sets DTF_REQUIRE_NETNS=1: a machine where the namespace tests
    would skip fails here instead of passing with them silently skipped."""
    if REQUIRED:
        assert REASON is None, f"DTF_REQUIRE_NETNS=1, but dtf.netns cannot run: {REASON}"
    elif REASON is not None:
        pytest.skip(f"dtf.netns: {REASON}")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hosts():
    if REASON is not None:
        pytest.skip(f"dtf.netns: {REASON}")
    with netns.Hosts() as made:
        print(f"\nhosts up in {made.setup_s:.2f} s:\n{made}")
        yield made
    _nothing_of(made.tag)


@pytest.fixture(scope="module")
def spec(hosts):
    """The post's config.json on these hosts: every task at its own address, port 2222."""
    return hosts.cluster_spec(port=2222)


@pytest.fixture(scope="module")
def cluster(hosts, spec):
    with hosts.local_cluster(spec, exclude="host", ready_timeout=READY_S) as running:
        print(f"\n2 servers in 2 namespaces ready in {running.startup_s:.2f} s")
        yield running


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return tmp_path_factory.mktemp("netns-clients")


@pytest.fixture(scope="module")
def first_clients(hosts, spec, cluster, logs):
    """The host joins and runs an op on each worker; at the same time a process in worker0,
    which is no task of the cluster, runs an op on worker1's server."""
    clients = {
        "ops": Client(hosts, "host", "post_client", [json.dumps(spec)], logs / "ops.log"),
        "stranger": Client(
            hosts,
            "worker0",
            "stranger",
            [f"grpc://{spec['worker'][1]}", "/job:worker/task:1"],
            logs / "stranger.log",
        ),
    }
    yield clients
    for client in clients.values():
        client.kill()


@pytest.fixture(scope="module")
def cut_run(hosts, spec, cluster, first_clients, logs):
    """Three clients run small ops on worker1 every 50 ms; worker1's link is cut; after
    ``HANG_S`` seconds the link is restored, and the client that was still waiting goes on
    (then it is killed)."""
    for client in first_clients.values():  # their ops must be over before the cut
        client.wait_for("exit", READY_S)
    second = {**spec, "host": [f"{hosts.address('host')}:2223"]}  # a second client in host
    clients = {
        "plain": Client(hosts, "host", "eager_loop", [json.dumps(spec), ""], logs / "plain.log"),
        "keepalive": Client(  # the course's keepalive settings in TF_GRPC_DEFAULT_OPTIONS
            hosts,
            "host",
            "eager_loop",
            [json.dumps(second), grpc_options_value()],
            logs / "keepalive.log",
        ),
        "deadline": Client(
            hosts,
            "host",
            "tf1_loop",
            [f"grpc://{spec['worker'][1]}", str(RUN_TIMEOUT_MS)],
            logs / "deadline.log",
        ),
    }
    try:
        began = time.monotonic()
        for client in clients.values():
            client.wait_for("op", READY_S)
        print(f"\n3 clients connected in {time.monotonic() - began:.1f} s")
        time.sleep(0.2)
        cut_at = time.monotonic()
        hosts.cut("worker1")
        link_was_up = hosts.link_up("worker1")
        answered_while_cut = answers(spec["worker"][1], timeout=1)
        while time.monotonic() < cut_at + HANG_S:
            time.sleep(0.1)
        still_waiting = clients["plain"].proc.poll() is None
        restored_at = time.monotonic()
        hosts.restore("worker1")
        # The waiting op goes on over the same connection at TCP's next retransmission.
        resumed = clients["plain"].first(
            lambda e: e["event"] == "op" and e["t"] > restored_at, RESUME_S
        )
        clients["plain"].kill()
        yield {
            "cut_at": cut_at,
            "restored_at": restored_at,
            "resumed": resumed,
            "clients": clients,
            "still_waiting": still_waiting,
            "link_was_up": link_was_up,
            "answered_while_cut": answered_while_cut,
        }
    finally:
        for client in clients.values():
            client.kill()
        if hosts.running:
            hosts.restore("worker1")


def _error(run: dict, name: str) -> tuple[dict, float]:
    client = run["clients"][name]
    error = client.wait_for("error", 1)
    return error, error["t"] - run["cut_at"]


# --------------------------------------------------------------------------- with root


@needs_root
def test_each_host_has_its_own_address_on_a_private_24(hosts):
    assert hosts.subnet.subnet_of(ipaddress.ip_network("10.0.0.0/8")) or hosts.subnet.subnet_of(
        ipaddress.ip_network("192.168.0.0/16")
    )
    others = [n for n in netns.routed_networks() if n != hosts.subnet]
    others = [n for n in others if not (n.prefixlen == 32 and n.subnet_of(hosts.subnet))]
    assert not [n for n in others if n.overlaps(hosts.subnet)], "the /24 was routed before"
    base = hosts.subnet.network_address
    assert hosts.addresses == {
        "host": f"{base + 11}",
        "worker0": f"{base + 12}",
        "worker1": f"{base + 13}",
    }
    for name in hosts.names:
        shown = netns.ip("-n", hosts.namespace(name), "-4", "-o", "addr", "show")
        assert f"inet {hosts.address(name)}/24" in shown and shown.count("inet ") == 2  # + lo
        routes = netns.ip("-n", hosts.namespace(name), "-4", "route", "show").strip().splitlines()
        assert routes == [
            f"{hosts.subnet} dev eth0 proto kernel scope link src {hosts.address(name)}"
        ]
        assert hosts.link_up(name)
    found = netns.ours()[hosts.tag]
    assert sorted(found["namespaces"]) == sorted(hosts.namespace(n) for n in hosts.names)
    assert sorted(found["links"]) == sorted([hosts.bridge] + [hosts.cable(n) for n in hosts.names])
    assert hosts.host_of(f"{hosts.address('worker1')}:2222") == "worker1"
    assert hosts.host_of("127.0.0.1:2222") is None


@needs_root
def test_servers_start_in_their_hosts_each_at_its_own_address(hosts, spec, cluster):
    assert spec == {
        "host": [f"{hosts.address('host')}:2222"],
        "worker": [f"{hosts.address('worker0')}:2222", f"{hosts.address('worker1')}:2222"],
    }
    assert cluster.start_method == "spawn" and cluster.startup_s < READY_S
    for index, host in enumerate(["worker0", "worker1"]):
        task = Task("worker", index)
        assert cluster.pid(task) in hosts.processes(host)  # the server runs in its host
        log = (cluster.log_dir / f"worker-{index}.log").read_text()
        assert "dtf-server: listening on every interface, port 2222" in log
        assert answers(f"{hosts.address(host)}:2222", timeout=5)
    assert hosts.processes("host") == []
    cluster.check(timeout=5)  # the root namespace reaches them through the bridge


@needs_root
def test_the_host_runs_an_op_on_each_worker(hosts, spec, first_clients):
    result = first_clients["ops"].wait_for("result", READY_S)
    assert result["c"] == PRODUCT  # a, b and c = matmul(a, b) under tf.device(worker/0)
    assert result["c_device"] == "/job:worker/replica:0/task:0/device:CPU:0"
    d = [c + math.log(100 + c) for row in PRODUCT for c in row]
    assert sum(result["d"], []) == pytest.approx(d)  # d = matmul(a, b) + log(100 + c), worker/1
    assert result["d_device"] == "/job:worker/replica:0/task:1/device:CPU:0"
    assert result["devices"] == [
        "/job:host/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:1/device:CPU:0",
    ]
    client = first_clients["ops"]
    print(f"\nhost client: import + connect + 2 ops in {result['t'] - client.started:.1f} s")


@needs_root
def test_a_server_is_reachable_from_another_host_it_listens_on_every_interface(
    hosts, spec, cluster, first_clients
):
    for host in ("worker0", "worker1"):
        assert set(hosts.listening(host, 2222)) <= {"[::]:2222", "0.0.0.0:2222"}
        assert hosts.listening(host, 2222)  # the wildcard, not the spec's address
    # worker0's namespace runs a process that is no task of the cluster and has no
    # credentials: it opens a session on worker1's server and reads /proc/self there,
    # which is the server process's own entry.
    result = first_clients["stranger"].wait_for("result", READY_S)
    status = dict(line.split(":", 1) for line in result["status"].splitlines())
    assert int(status["Pid"]) == cluster.pid("worker/1") != result["me"]
    assert "dtf.cluster.server" in result["cmdline"].split("\0")
    assert answers(spec["worker"][1], timeout=5)  # and so does the root namespace


@needs_root
def test_a_port_in_use_in_a_host_is_named_at_once(hosts, spec, cluster, tmp_path):
    taken = spec["worker"][0]  # worker0's server listens there, in worker0's namespace
    began = time.monotonic()
    with pytest.raises(PortInUseError, match="port 2222 of task worker/0 is in use") as info:
        hosts.local_cluster({"worker": [taken]}, ready_timeout=READY_S, log_dir=tmp_path).start()
    assert info.value.task == Task("worker", 0)
    assert time.monotonic() - began < 15  # the server checks its port before TensorFlow loads
    log = (tmp_path / "worker-0.log").read_text()
    assert log.count("is in use") == 1, log  # a given port: one try, no retry on other ports
    cluster.check()


@needs_root
def test_a_task_in_a_host_restarts_at_its_address(hosts, spec, cluster, first_clients):
    """Its port is checked in its host, not here: even a taken port 2222 here is no clash."""
    first_clients["stranger"].proc.wait(timeout=READY_S)  # it ran in worker0: let it end
    old = cluster.pid("worker/0")
    assert cluster.kill("worker/0") == -signal.SIGKILL and hosts.processes("worker0") == []
    with socket.socket() as here:
        try:
            here.bind(("0.0.0.0", 2222))  # the same port in the root namespace...
        except OSError:
            pass  # ...or somebody else has it: just as good
        cluster.restart("worker/0")
    assert hosts.processes("worker0") == [cluster.pid("worker/0")] != [old]
    assert cluster.address("worker/0") == spec["worker"][0]
    cluster.check(timeout=5)


@needs_root
def test_a_cut_link_hangs_an_eager_client_without_keepalive(cut_run):
    plain = cut_run["clients"]["plain"]
    assert not cut_run["link_was_up"] and not cut_run["answered_while_cut"]
    assert plain.of("connected")[0]["grpc"] == ""
    assert cut_run["still_waiting"], f"the client without keepalive ended:{plain.tail()}"
    assert not plain.of("error")
    late = [e for e in plain.of("op") if cut_run["cut_at"] + 0.5 < e["t"] < cut_run["restored_at"]]
    assert not late, "an op completed over a cut link"
    # It was waiting, not broken: the same connection carries on once the link is back.
    assert cut_run["resumed"], f"no op completed after the link came back:{plain.tail()}"
    resumed_after = cut_run["resumed"]["t"] - cut_run["restored_at"]
    print(
        f"\nwithout keepalive: still waiting {HANG_S:.0f} s after the cut; "
        f"went on {resumed_after:.1f} s after the link came back"
    )


@needs_root
def test_keepalive_defaults_turn_a_cut_link_into_unavailable_within_10_s(cut_run):
    client = cut_run["clients"]["keepalive"]
    assert client.of("connected")[0]["grpc"] == grpc_options_value()
    error, seconds = _error(cut_run, "keepalive")
    print(f"\nkeepalive: {error['type']} {seconds:.2f} s after the cut: {error['message']}")
    assert error["type"] == "UnavailableError"
    assert 0 < seconds < ERROR_WITHIN_S


@needs_root
def test_tf1_run_options_deadline_gives_deadline_exceeded(cut_run):
    error, seconds = _error(cut_run, "deadline")
    what = f"RunOptions(timeout_in_ms={RUN_TIMEOUT_MS})"
    print(f"\n{what}: {error['type']} {seconds:.2f} s after the cut: {error['message']}")
    assert error["type"] == "DeadlineExceededError"
    assert RUN_TIMEOUT_MS / 1000 - 0.1 <= error["t"] - error["began"] < ERROR_WITHIN_S
    assert seconds < ERROR_WITHIN_S


@needs_root
def test_the_link_comes_back(hosts, spec, cluster, cut_run):
    assert hosts.link_up("worker1")
    assert answers(spec["worker"][1], timeout=5)
    cluster.check(timeout=5)


@needs_root
def test_a_crashed_owner_leaves_nothing_for_the_next_run(tmp_path):
    """A process killed with SIGKILL cannot clean up: the next run removes what it left."""
    code = (
        "import os, signal\n"
        "from subprocess import DEVNULL\n"
        "from dtf.netns import Hosts\n"
        "hosts = Hosts(['a', 'b']).up()\n"
        "sleeper = hosts.popen('b', ['sleep', '300'], stdout=DEVNULL, stderr=DEVNULL)\n"
        "print(hosts.tag, sleeper.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(  # the sleeper stays in namespace b
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    tag, sleeper = done.stdout.split()
    with netns._machine_lock():  # as Hosts.up() does: no other run cleans up meanwhile
        found = netns.ours().get(tag)
        alive = psutil.pid_exists(int(sleeper))
        removed = netns.clean_leftovers()
    if found is not None:  # else another test run's up() on this machine was quicker
        assert len(found["namespaces"]) == 2 and len(found["links"]) == 3 and alive
        assert set(found["namespaces"] + found["links"]) <= set(removed)
    _nothing_of(tag)
    assert processes_gone([int(sleeper)])


@needs_root
def test_an_interrupt_an_error_or_a_plain_exit_leaves_nothing():
    code = (
        "import os, signal, sys, time\n"
        # Python ignores SIGINT if it started ignored (a background job of a shell): restore it.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from subprocess import DEVNULL\n"
        "from dtf.netns import Hosts\n"
        "how = sys.argv[1]\n"
        "hosts = Hosts(['a']).up()\n"  # its down() is also an atexit hook
        "sleeper = hosts.popen('a', ['sleep', '300'], stdout=DEVNULL, stderr=DEVNULL)\n"
        "print(hosts.tag, sleeper.pid, flush=True)\n"
        "if how == 'exit':\n"
        "    sys.exit(0)\n"  # no down(): the atexit hook takes them down
        "with hosts:\n"
        "    if how == 'interrupt':\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(30)\n"
        "    raise RuntimeError('a failing cell')\n"
    )
    cases = {  # how: (exit status, in stderr); Python re-raises an uncaught SIGINT
        "interrupt": (-signal.SIGINT, "KeyboardInterrupt"),
        "error": (1, "a failing cell"),
        "exit": (0, ""),
    }
    for how, (status, message) in cases.items():
        done = subprocess.run(
            [sys.executable, "-c", code, how], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert done.returncode == status and message in done.stderr, (how, done.stderr)
        tag, sleeper = done.stdout.split()
        _nothing_of(tag)
        assert processes_gone([int(sleeper)], within=1)


@needs_root
def test_the_command_line():
    tag = f"t{os.getpid() % 10**7}"  # a kept tag of its own: test runs at once never meet

    up = netns_cli("up", "--hosts", "host,worker0", "--tag", tag)
    try:
        assert up.returncode == 0, up.stderr
        server = f"ip netns exec dtf-{tag}-worker0 {sys.executable} -m dtf.cluster.server"
        assert server in up.stdout and "--job worker --task 0" in up.stdout
        client = f"client, as host/0: ip netns exec dtf-{tag}-host {sys.executable}"
        assert client in up.stdout
        assert "--job host" not in up.stdout  # the host is the client, not a server
        assert f"python -m dtf.netns down --tag {tag}" in up.stdout
        spec = json.loads(up.stdout.split("cluster: ", 1)[1].splitlines()[0])
        assert list(spec) == ["host", "worker"] and spec["worker"][0].endswith(":2222")
        assert f"-m dtf.lessons.post_client '{json.dumps(spec)}'" in up.stdout
        again = netns_cli("up", "--tag", tag)
        assert again.returncode == 1 and f"hosts tagged '{tag}' exist already" in again.stderr
        assert tag in netns.ours()  # the refused second `up` removed nothing
        status = netns_cli("status")
        assert f"tag {tag}: made by python -m dtf.netns up (kept until down)" in status.stdout
        assert f"namespace dtf-{tag}-worker0" in status.stdout
        assert not [n for n in netns.clean_leftovers() if tag in n]  # kept: not a leftover
    finally:
        down = netns_cli("down", "--tag", tag)
    assert down.returncode == 0 and f"dtf-{tag}-host" in down.stdout
    _nothing_of(tag)
    wrong = netns_cli("up", "--subnet", "8.8.8.0/24", "--tag", tag)
    assert wrong.returncode == 2 and "must be a private /24" in wrong.stderr
    assert netns_cli("up", "--tag", "Bad-Tag").returncode == 2
    _nothing_of(tag)


@needs_root
def test_down_leaves_no_namespace_link_or_process(hosts, cluster, cut_run):
    """The last test: stop the cluster and take the hosts down, as the fixtures would."""
    pids = [*cluster.pids.values(), *(c.proc.pid for c in cut_run["clients"].values())]
    tag = hosts.tag
    cluster.stop()
    began = time.monotonic()
    removed = hosts.down()
    print(f"\nhosts down in {time.monotonic() - began:.2f} s: {', '.join(removed)}")
    assert len(removed) == 7  # 3 namespaces, 3 cables, 1 bridge
    _nothing_of(tag)
    assert processes_gone(pids, within=1)
    assert hosts.down() == []  # again: nothing to do
