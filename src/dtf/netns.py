"""Several "hosts" on one machine: Linux network namespaces on a private /24 of their own.

The cluster of the *Distributed Computation in TensorFlow* post has a ``host`` and two
``worker`` machines, each with its own IP address. On one Linux machine, each of them can be a
*network namespace*: its own interfaces, addresses, routes and ports, so every task listens
on port 2222 at an address of its own, as in the post's ``config.json``::

    from dtf.netns import Hosts

    with Hosts(["host", "worker0", "worker1"]) as hosts:   # needs root
        hosts.address("worker1")                 # '10.213.0.13'
        spec = hosts.cluster_spec(port=2222)     # {"host": ["10.213.0.11:2222"], "worker": [...]}
        with hosts.local_cluster(spec, exclude="host") as cluster:   # servers in worker0, worker1
            hosts.popen("host", [sys.executable, "client.py"])        # a client in "host"
            with hosts.link_cut("worker1"):       # pull worker1's cable...
                ...                               # ...and put it back on leaving the block
    # namespaces, links, bridge and every process in them are gone here

From a shell: ``python -m dtf.netns up`` (prints the addresses, the cluster JSON, the
command that starts each server and the one that runs notebook 13's client program,
:mod:`dtf.lessons.post_client`, in ``host``), ``python -m dtf.netns status``,
``python -m dtf.netns down``.

A cluster no other machine reaches
    :func:`private_cluster` gives every task of a spec a host of its own and starts its server
    there: a :class:`~dtf.cluster.LocalCluster` whose ports are open only on the private /24
    (why a server on this machine's own addresses is an open door: :mod:`dtf.cluster.exposure`).
    It lives here, not in :mod:`dtf.cluster`, because it is built on :class:`Hosts`: the
    cluster package stays below this module and never imports it.

The network
    One Linux *bridge* in the root namespace (a virtual switch) with the address ``.1`` of a
    private /24 that is not routed on this machine yet (picked from ``10.213.0.0/24``,
    ``10.213.1.0/24``, ... after reading ``ip route``; a ``subnet`` of your own must be a /24
    in ``10.0.0.0/8`` or ``192.168.0.0/16`` and free too), and for each host a namespace with a
    *veth pair*, a virtual cable: one end (``eth0``, address ``.11``, ``.12``, ...) in the
    namespace, the other plugged into the bridge. The namespaces get no default route, so
    they reach only the /24, and the interfaces make no IPv6 link-local addresses: nothing
    they send leaves the bridge. The root namespace reaches every host through the bridge's
    address (so :func:`dtf.cluster.answers` and ``LocalCluster.check(timeout=...)`` work
    from here).

Cutting a link
    :meth:`Hosts.cut` sets the root end of the host's veth pair down (``ip link set ... down``),
    :meth:`Hosts.restore` sets it up again: the cable pulled out of the switch. Frames to and
    from the host are then dropped silently in both directions, with no error to anybody, as
    when a cable is pulled or a machine vanishes: open TCP connections look healthy, and only
    a timeout can tell. Why this way: one command cuts both directions and needs nothing
    else (``tc ... netem loss 100%`` drops only what an interface sends, so the other
    direction needs a second device, and the ``sch_netem`` module; ``iptables`` is often
    not installed); the host's own configuration is untouched, so restoring the link resumes
    the same connections. Setting the namespace's end down instead would also remove the
    host's route, so its own sends would fail at once inside it rather than vanish on the
    wire.

Names, clean-up, crashes
    Everything created carries a *tag*: the owner's process id and a letter
    (``dtf-4711a-worker0`` for a namespace, ``dtfb4711a`` for the bridge, ``dtfv4711ax1`` for
    the root end of host 1's cable). Hosts made by ``python -m dtf.netns up`` carry a *kept*
    tag instead (``cli`` unless ``--tag`` names another): they stay until ``python -m
    dtf.netns down``, and several sets can live side by side. :meth:`Hosts.down` stops every
    process in the namespaces (``SIGTERM``, then ``SIGKILL``) and deletes the cables, the
    namespaces and the bridge; it runs on leaving the ``with`` block (also by an exception or
    ``KeyboardInterrupt``) and at interpreter exit. A process killed outright (``SIGKILL``,
    and ``SIGTERM`` which Python does not turn into an exit) cannot clean up: the next
    :meth:`Hosts.up` on this machine, and ``python -m dtf.netns down``, remove whatever a tag
    whose owner process is gone left behind (:func:`clean_leftovers`). Hosts of a process
    that still runs are never touched.

Measured (2 CPU cores, TensorFlow 2.21, other test runs beside; ``tests/test_netns.py``
prints these on every run)
    Three hosts up in ~0.1 s and down in ~0.1 s. Two servers in two hosts, started at once
    (``spawn``), ready in 1.7-2.9 s, 5-6.6 s on a loaded machine. With worker1's link cut
    under a client that runs an op on it every 50 ms: an eager client without keepalive is
    still waiting 10 s later (and goes on, over the same connection, 0.2-3.3 s after the link
    is back: TCP's next retransmission); with :func:`dtf.cluster.apply_grpc_options` it gets
    ``UnavailableError`` ("ping timeout", or "recvmsg:Connection timed out") 2.0-2.3 s after
    the cut; a TF1 ``Session.run`` with ``RunOptions(timeout_in_ms=2000)`` gets
    ``DeadlineExceededError`` ("Deadline Exceeded") 2.0 s after it.

Needs
    Linux, the ``ip`` command (iproute2) and root, or precisely the capabilities
    :data:`REQUIRED_CAPABILITIES`: ``CAP_SYS_ADMIN`` (namespaces) and ``CAP_NET_ADMIN``
    (links). :func:`unavailable_reason` says in one line what is missing;
    :func:`check_supported` raises :class:`NetnsUnavailable` with that line, and
    :data:`FULL_LESSON` says where notebook 13 runs in full: the course's dev container
    (``.devcontainer/``, which grants the two capabilities; ``tests/test_devcontainer.py``
    checks it against this constant) or, on Linux, a JupyterLab run as root.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import psutil

from dtf import supervise
from dtf._util import command_name
from dtf.cluster import LocalCluster, deadline, exposure
from dtf.cluster.spec import Task, all_tasks, free_ports, load, select_tasks, split_address

#: Every namespace this module makes is called ``dtf-<tag>-<host>``.
NS_PREFIX = "dtf-"
#: Interface names: ``dtfb<tag>`` (bridge) and ``dtfv<tag>x<i>`` (root end of host i's cable).
BRIDGE_PREFIX, VETH_PREFIX = "dtfb", "dtfv"
#: The default tag of hosts made by ``python -m dtf.netns up``: they live until ``down``.
CLI_TAG = "cli"
#: The hosts of the post: the client's machine and two workers.
DEFAULT_HOSTS = ("host", "worker0", "worker1")
#: Most hosts one :class:`Hosts` makes (one digit in the cable's interface name).
MAX_HOSTS = 9
#: The /24 networks tried, in order, when no subnet is given: ``10.213.N.0/24``.
SUBNET_CANDIDATES = tuple(ipaddress.IPv4Network(f"10.213.{n}.0/24") for n in range(256))
#: Where a given subnet may come from.
PRIVATE_RANGES = (ipaddress.IPv4Network("10.0.0.0/8"), ipaddress.IPv4Network("192.168.0.0/16"))
#: Host ``i`` (from 0) gets the address ``.FIRST_HOST + i``; the bridge gets ``.1``.
FIRST_HOST = 11
#: Seconds :meth:`Hosts.down` waits between ``SIGTERM`` and ``SIGKILL``.
STOP_GRACE_S = 3.0
#: Seconds any one ``ip`` command may take.
IP_TIMEOUT_S = 20.0

_HOST_NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")
#: A kept tag (hosts that outlive their process): a letter, then up to 7 letters or digits.
KEPT_TAG = re.compile(r"[a-z][a-z0-9]{0,7}")
_TAG = rf"(?:\d+[a-z]|{KEPT_TAG.pattern})"  # a process's id and a letter, or a kept tag
_NS_NAME = re.compile(rf"^{re.escape(NS_PREFIX)}(?P<tag>{_TAG})-(?P<host>.+)$")
_LINK_NAME = re.compile(
    rf"^(?:{BRIDGE_PREFIX}(?P<bridge>{_TAG})|{VETH_PREFIX}(?P<cable>{_TAG})x\d)$"
)
#: The capabilities making hosts needs (``capabilities(7)`` name: bit in ``/proc/self/status``):
#: ``CAP_SYS_ADMIN`` for the namespaces (``ip netns add`` bind-mounts each one under
#: ``/run/netns``, ``ip netns exec`` enters it and mounts its own ``/sys``), ``CAP_NET_ADMIN``
#: for the bridge, the cables, their addresses and cutting them. Root has both; the dev
#: container (``.devcontainer/devcontainer.json``) adds them with ``--cap-add``.
REQUIRED_CAPABILITIES = {"CAP_SYS_ADMIN": 21, "CAP_NET_ADMIN": 12}
_CAP_NET_ADMIN, _CAP_SYS_ADMIN = (
    REQUIRED_CAPABILITIES[c] for c in ("CAP_NET_ADMIN", "CAP_SYS_ADMIN")
)
#: How to get notebook 13's full lesson where hosts cannot be made: the second half of each
#: of its ``skipped: ...`` lines.
FULL_LESSON = (
    "for the full lesson open the course in its dev container (VS Code or GitHub Codespaces, "
    "README.md, Installing), or on Linux run JupyterLab as root: "
    "sudo .venv/bin/jupyter lab --allow-root"
)
_LOCK_DIR = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
_LOCK_FILE = _LOCK_DIR / "dtf-netns.lock"
_local = threading.Lock()
_live_tags: set[str] = set()  # tags of this process's hosts that are up


class NetnsError(RuntimeError):
    """An ``ip`` command failed, or the hosts are in a state that does not allow the call."""


class NetnsUnavailable(NetnsError):
    """Network namespaces cannot be used here (not Linux, no ``ip``, not root)."""


# --------------------------------------------------------------------------- can we?


def _capabilities() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return None


def hosted_runtime() -> str | None:
    """ "Google Colab" or "Kaggle" when this process runs in one (as the setup cell tells)."""
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE"):
        return "Kaggle"
    try:
        import google.colab  # noqa: F401
    except ImportError:
        return None
    return "Google Colab"


def unavailable_reason() -> str | None:
    """``None`` when this process can make hosts, else one line saying what is missing."""
    reason = _missing()
    hosted = hosted_runtime() if reason and reason.startswith("needs root") else None
    if hosted:  # root there, but in a container that may not change its network
        return (
            f"{hosted} runs notebooks in a container without the capabilities network "
            f"namespaces need ({reason}); read the stored outputs, or run this part on Linux "
            "as root (the course's dev container)"
        )
    return reason


def _missing() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux; this is {sys.platform}"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed: e.g. apt-get install iproute2"
    caps = _capabilities()
    needed = sum(1 << bit for bit in REQUIRED_CAPABILITIES.values())
    if (caps is None and os.geteuid() != 0) or (caps is not None and caps & needed != needed):
        return (
            "needs root: network namespaces and links need "
            f"{' and '.join(REQUIRED_CAPABILITIES)}, "
            f"which this process (uid {os.geteuid()}) does not have"
        )
    return None


def check_supported() -> None:
    """Raise :class:`NetnsUnavailable` with :func:`unavailable_reason`'s line, if any."""
    reason = unavailable_reason()
    if reason:
        raise NetnsUnavailable(reason)


# --------------------------------------------------------------------------- ip commands


def ip(*args: str, check: bool = True, timeout: float = IP_TIMEOUT_S) -> str:
    """Run ``ip ARGS`` and return its standard output; :class:`NetnsError` when it fails."""
    command = ["ip", *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise NetnsUnavailable(unavailable_reason() or "the `ip` command is missing") from None
    except subprocess.TimeoutExpired:
        raise NetnsError(f"`{' '.join(command)}` did not finish within {timeout} s") from None
    if check and done.returncode != 0:
        raise NetnsError(
            f"`{' '.join(command)}` failed (exit status {done.returncode}): "
            f"{done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def _json(*args: str):
    text = ip("-j", *args)
    return json.loads(text) if text.strip() else []


def namespaces() -> list[str]:
    """The names of every network namespace on this machine (``ip netns list``)."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def links() -> list[str]:
    """The names of every interface of the root namespace."""
    return [entry["ifname"] for entry in _json("link", "show")]


def routed_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine routes or has an address in (all routing tables)."""
    found = []
    for entry in _json("-4", "route", "show", "table", "all"):
        dst = entry.get("dst", "default")
        if dst != "default":
            with contextlib.suppress(ValueError):
                found.append(ipaddress.IPv4Network(dst, strict=False))
    for interface in _json("-4", "addr", "show"):
        for info in interface.get("addr_info", []):
            with contextlib.suppress(ValueError, KeyError):
                found.append(
                    ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}", strict=False)
                )
    return found


def check_subnet(subnet) -> ipaddress.IPv4Network:
    """``subnet`` as a network if it is a /24 in 10.0.0.0/8 or 192.168.0.0/16 (ValueError)."""
    try:
        network = ipaddress.ip_network(subnet)
    except (TypeError, ValueError):
        raise ValueError(
            f"subnet {subnet!r} is not a network: write e.g. '10.213.7.0/24'."
        ) from None
    if (
        not isinstance(network, ipaddress.IPv4Network)
        or network.prefixlen != 24
        or not any(network.subnet_of(r) for r in PRIVATE_RANGES)
    ):
        raise ValueError(
            f"subnet {subnet!r} must be a private /24 in 10.0.0.0/8 or 192.168.0.0/16, e.g. "
            "'10.213.7.0/24' (the hosts' addresses must not belong to anybody else)."
        )
    return network


def pick_subnet(
    taken: Iterable[ipaddress.IPv4Network], candidates=SUBNET_CANDIDATES
) -> ipaddress.IPv4Network:
    """The first candidate /24 that overlaps none of the ``taken`` networks."""
    taken = list(taken)
    for candidate in candidates:
        if not any(candidate.overlaps(net) for net in taken):
            return candidate
    raise NetnsError(
        "every candidate /24 (10.213.0.0/24 to 10.213.255.0/24) is routed on this machine "
        "already: pass subnet='10.N.M.0/24' that is free (see `ip route`)."
    )


@contextlib.contextmanager
def _machine_lock():
    """One process at a time picks a subnet and a tag, and removes leftovers."""
    # O_NOFOLLOW: a root process must not follow a link somebody put in a shared folder.
    fd = os.open(_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        with _local:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- leftovers


def _owner_alive(tag: str) -> bool:
    if not tag[0].isdigit():  # a kept tag: removed only when asked
        return True
    pid = int(tag[:-1])
    if pid == os.getpid():
        return tag in _live_tags
    return psutil.pid_exists(pid)


def ours() -> dict[str, dict[str, list[str]]]:
    """Everything this module made on this machine, by tag: ``{tag: {"namespaces": [...],
    "links": [...]}}`` (any process's, and leftovers)."""
    found: dict[str, dict[str, list[str]]] = {}
    for name in namespaces():
        match = _NS_NAME.match(name)
        if match:
            found.setdefault(match["tag"], {"namespaces": [], "links": []})["namespaces"].append(
                name
            )
    for name in links():
        match = _LINK_NAME.match(name)
        if match:
            tag = match["bridge"] or match["cable"]
            found.setdefault(tag, {"namespaces": [], "links": []})["links"].append(name)
    return found


def processes_in(namespace: str) -> list[int]:
    """The ids of the processes in ``namespace`` (``ip netns pids``)."""
    text = ip("netns", "pids", namespace, check=False)
    return [int(p) for p in text.split() if p.isdigit()]


def remove(tag: str, grace: float = STOP_GRACE_S) -> list[str]:
    """Stop the processes in the namespaces of ``tag`` and delete its namespaces and links;
    returns what it deleted. Nothing of another tag is touched."""
    found = ours().get(tag, {"namespaces": [], "links": []})
    pids = [pid for ns in found["namespaces"] for pid in processes_in(ns)]
    supervise.stop_processes(pids, grace)  # SIGTERM, SIGKILL after the grace, reaped
    # Cables first (deleting one end deletes both, at once), then namespaces, bridge last.
    for name in sorted(found["links"], key=lambda n: n.startswith(BRIDGE_PREFIX)):
        ip("link", "delete", name, check=False)
    for name in found["namespaces"]:
        ip("netns", "delete", name, check=False)
    left = ours().get(tag, {"namespaces": [], "links": []})
    if left["namespaces"] or left["links"]:
        raise NetnsError(
            f"could not remove {', '.join(left['namespaces'] + left['links'])}: "
            "see `python -m dtf.netns status`."
        )
    return found["links"] + found["namespaces"]


def clean_leftovers(everything: bool = False) -> list[str]:
    """Remove what hosts whose owner process is gone left behind (with ``everything=True``:
    every tag, kept tags and other live processes' hosts included); returns the names
    removed."""
    removed = []
    for tag in ours():
        if everything or not _owner_alive(tag):
            with contextlib.suppress(NetnsError):  # best effort: `status` shows what is left
                removed += remove(tag)
    return removed


# --------------------------------------------------------------------------- hosts


def _host_names(names) -> list[str]:
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not 1 <= len(names) <= MAX_HOSTS:
        raise ValueError(f"give 1 to {MAX_HOSTS} host names, got {len(names)}.")
    for name in names:
        if not isinstance(name, str) or not _HOST_NAME.fullmatch(name):
            raise ValueError(
                f"host name {name!r} is not valid: a lowercase letter, then up to 15 lowercase "
                "letters, digits or '_' (e.g. 'worker0')."
            )
    if len(set(names)) != len(names):
        raise ValueError(f"host names must differ: {names}.")
    return names


def job_of(host: str) -> str:
    """The job a host's task belongs to: its name without trailing digits (``worker1`` ->
    ``worker``, ``host`` -> ``host``)."""
    return host.rstrip(string.digits) or host


class Hosts(supervise.Supervisor):
    """Network namespaces as hosts on a private /24 (see the module docstring).

    ``names``: the hosts, by default ``host``, ``worker0``, ``worker1``. ``subnet``: a free
    private /24 (default: the first free ``10.213.N.0/24``). ``grace``: seconds between
    ``SIGTERM`` and ``SIGKILL`` for processes still running in a namespace at :meth:`down`.
    ``tag``: a name for hosts meant to outlive this process (see :data:`KEPT_TAG`; what
    ``python -m dtf.netns up`` uses): they are never removed as leftovers, only by
    :meth:`down` or ``python -m dtf.netns down --tag TAG``. Use it as a context manager, or
    call :meth:`up` and :meth:`down`.
    """

    def __init__(
        self,
        names: Sequence[str] = DEFAULT_HOSTS,
        *,
        subnet=None,
        grace: float = STOP_GRACE_S,
        tag: str | None = None,
    ):
        self.names = _host_names(names)
        if tag is not None and not (isinstance(tag, str) and KEPT_TAG.fullmatch(tag)):
            raise ValueError(
                f"tag {tag!r} is not valid: a lowercase letter, then up to 7 lowercase letters "
                "or digits (e.g. 'cli', 'lab1')."
            )
        self._subnet_given = None if subnet is None else check_subnet(subnet)
        self.grace = float(grace)
        self._fixed_tag = tag
        self.tag: str | None = None
        self.subnet: ipaddress.IPv4Network | None = None
        self.setup_s: float | None = None

    # ------------------------------------------------------------------ life cycle

    _START, _STOP, _RUNNING, _STOPPED = "up", "down", "up", "down"

    def up(self) -> Hosts:
        """Create the bridge, the namespaces and their cables; returns ``self``."""
        if self._phase == "new":
            check_supported()
        self._begin(NetnsError(f"these hosts are {self._phase}; make a new Hosts to start again."))
        began = time.monotonic()
        try:
            with _machine_lock():
                clean_leftovers()
                if self._fixed_tag is not None and self._fixed_tag in ours():
                    raise NetnsError(
                        f"hosts tagged {self._fixed_tag!r} exist already: take them down first "
                        f"(python -m dtf.netns down --tag {self._fixed_tag})."
                    )
                self.tag = self._fixed_tag or self._free_tag()
                _live_tags.add(self.tag)
                taken = routed_networks()
                if self._subnet_given is not None:
                    clash = [n for n in taken if n.overlaps(self._subnet_given)]
                    if clash:
                        raise NetnsError(
                            f"subnet {self._subnet_given} overlaps {clash[0]}, which this "
                            "machine already routes (`ip route`): pick another /24."
                        )
                    self.subnet = self._subnet_given
                else:
                    self.subnet = pick_subnet(taken)
                self._make_bridge()  # its route now marks the subnet as taken
            for index, name in enumerate(self.names):
                self._make_host(index, name)
            self.setup_s = time.monotonic() - began
            self._started()
            return self
        except BaseException:
            self.down()
            raise

    def down(self) -> list[str]:
        """Stop every process in the namespaces and delete everything of these hosts;
        returns the names deleted. Safe to call more than once."""
        if not self._end():
            return []
        try:
            return remove(self.tag, self.grace) if self.tag else []
        finally:
            _live_tags.discard(self.tag)
            self._ended()

    def _free_tag(self) -> str:
        existing = set(ours())
        for letter in string.ascii_lowercase:
            tag = f"{os.getpid()}{letter}"
            if tag not in existing and tag not in _live_tags:
                return tag
        raise NetnsError("this process has 26 sets of hosts up: take some down() first.")

    def _make_bridge(self) -> None:
        bridge = self.bridge
        ip("link", "add", "name", bridge, "type", "bridge", "forward_delay", "0")
        ip("link", "set", bridge, "addrgenmode", "none")
        ip("addr", "add", f"{self.bridge_address}/24", "dev", bridge)
        ip("link", "set", bridge, "up")

    def _make_host(self, index: int, name: str) -> None:
        ns, cable = self.namespace(name), self.cable(name)
        ip("netns", "add", ns)
        ip("link", "add", cable, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", cable, "addrgenmode", "none")
        ip("link", "set", cable, "master", self.bridge, "up")
        ip("-n", ns, "link", "set", "eth0", "addrgenmode", "none")
        ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")

    # ------------------------------------------------------------------ names and addresses

    def _check_host(self, name: str) -> str:
        if name not in self.names:
            raise NetnsError(f"unknown host {name!r}: the hosts are {', '.join(self.names)}.")
        if self.tag is None:
            raise NetnsError("these hosts are not up yet: call up() first.")
        return name

    def namespace(self, name: str) -> str:
        """The network namespace of host ``name``: ``dtf-<tag>-<name>``."""
        return f"{NS_PREFIX}{self.tag}-{self._check_host(name)}"

    def cable(self, name: str) -> str:
        """The root end of host ``name``'s veth pair (the one :meth:`cut` sets down)."""
        return f"{VETH_PREFIX}{self.tag}x{self.names.index(self._check_host(name))}"

    @property
    def bridge(self) -> str:
        if self.tag is None:
            raise NetnsError("these hosts are not up yet: call up() first.")
        return f"{BRIDGE_PREFIX}{self.tag}"

    @property
    def bridge_address(self) -> str:
        """The root namespace's address on the hosts' network (``.1``)."""
        return str(self._network().network_address + 1)

    def address(self, name: str) -> str:
        """Host ``name``'s IP address (``.11`` for the first host, ``.12``, ...)."""
        index = self.names.index(self._check_host(name))
        return str(self._network().network_address + FIRST_HOST + index)

    def _network(self) -> ipaddress.IPv4Network:
        if self.subnet is None:
            raise NetnsError("these hosts are not up yet: call up() first.")
        return self.subnet

    @property
    def addresses(self) -> dict[str, str]:
        return {name: self.address(name) for name in self.names}

    def host_of(self, address: str) -> str | None:
        """The host whose IP is the host part of ``address`` (``ip`` or ``ip:port``)."""
        ip_text = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
        for name in self.names:
            if self.address(name) == ip_text.strip():
                return name
        return None

    def cluster_spec(self, port: int = 2222, jobs: Mapping[str, Sequence[str]] | None = None):
        """A cluster spec with one task per host, each at its own address and ``port``.

        ``jobs``: ``{"host": ["host"], "worker": ["worker0", "worker1"]}``; by default each
        host is a task of the job named by its name without trailing digits (:func:`job_of`),
        in the order of ``names``.
        """
        if jobs is None:
            by_job: dict[str, list[str]] = {}
            for name in self.names:
                by_job.setdefault(job_of(name), []).append(name)
            jobs = by_job
        return {job: [f"{self.address(h)}:{port}" for h in hosts] for job, hosts in jobs.items()}

    # ------------------------------------------------------------------ running things

    def command(self, name: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run in host ``name``: ``["ip", "netns", "exec", namespace, *argv]``."""
        return ["ip", "netns", "exec", self.namespace(name), *argv]

    def run(self, name: str, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
        """``subprocess.run`` of ``argv`` in host ``name`` (default timeout 60 s)."""
        kwargs.setdefault("timeout", 60)
        return subprocess.run(self.command(name, argv), **kwargs)

    def popen(self, name: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """``subprocess.Popen`` of ``argv`` in host ``name`` (``ip netns exec`` becomes the
        command: the process id is the command's). :meth:`down` stops it at the latest."""
        return subprocess.Popen(self.command(name, argv), **kwargs)

    def processes(self, name: str | None = None) -> list[int]:
        """The ids of the processes in host ``name`` (default: in every host)."""
        names = self.names if name is None else [name]
        return [pid for n in names for pid in processes_in(self.namespace(n))]

    def listening(self, name: str, port: int | None = None) -> list[str]:
        """The addresses TCP sockets listen on in host ``name`` (``0.0.0.0:2222``,
        ``[::]:2222``), from the namespace's ``/proc/net/tcp`` and ``tcp6``."""
        found = []
        for table in ("tcp", "tcp6"):
            done = self.run(name, ["cat", f"/proc/net/{table}"], capture_output=True, text=True)
            found += _listening(done.stdout, port)
        return found

    def local_cluster(self, spec, **kwargs):
        """A :class:`dtf.cluster.LocalCluster` whose tasks at a host's address run their
        servers in that host (``ip netns exec``); other arguments as for ``LocalCluster``."""
        jobs = load(spec)
        prefixes = {}
        for task in all_tasks(jobs):
            address = jobs[task.job][task.index]
            host = None if address is None else self.host_of(split_address(address)[0])
            if host is not None:
                prefixes[str(task)] = ["ip", "netns", "exec", self.namespace(host)]
        kwargs.setdefault("start_method", "spawn")
        return LocalCluster(jobs, command_prefix=prefixes, **kwargs)

    # ------------------------------------------------------------------ links

    def cut(self, name: str) -> None:
        """Cut host ``name``'s link: everything to and from it is dropped silently."""
        ip("link", "set", self.cable(name), "down")

    def restore(self, name: str) -> None:
        """Put host ``name``'s link back."""
        ip("link", "set", self.cable(name), "up")

    def link_up(self, name: str) -> bool:
        """Whether host ``name``'s link is up (not cut)."""
        (entry,) = _json("link", "show", self.cable(name))
        return "UP" in entry.get("flags", [])

    @contextlib.contextmanager
    def link_cut(self, name: str):
        """Cut host ``name``'s link for the ``with`` block, and put it back after it."""
        self.cut(name)
        try:
            yield
        finally:
            if self.running:
                self.restore(name)

    def __repr__(self) -> str:
        if self.tag is None:
            return f"Hosts({', '.join(self.names)}; {self._phase})"
        lines = [
            f"Hosts({self._phase}, subnet {self.subnet}, bridge {self.bridge} "
            f"at {self.bridge_address})"
        ]
        for name in self.names:
            lines.append(f"  {name:<10} {self.address(name):<15} {self.namespace(name)}")
        return "\n".join(lines)


def _listening(table: str, port: int | None) -> list[str]:
    found = []
    for address, at in exposure.listening_sockets(table):
        if port is None or at == port:
            found.append(f"[{address}]:{at}" if ":" in address else f"{address}:{at}")
    return found


# --------------------------------------------------------------------------- private cluster


def _host_name(task: Task) -> str:
    return f"{task.job.lower()[:14]}{task.index}".replace("-", "_")


class PrivateCluster:
    """A :class:`~dtf.cluster.LocalCluster` whose servers run in hosts of this module,
    reachable from this machine only (why it matters: :mod:`dtf.cluster.exposure`).

    ``spec``: the jobs and their task counts (``{"worker": 2}``) or a spec with addresses,
    whose addresses are replaced: each started task gets a namespace (a "host") of its own
    and listens at its private address on ``port``. Tasks in ``exclude`` are played by this
    process (e.g. ``host``): they get the bridge's address (this machine on the private
    network) and a free port. Other keyword arguments go to ``LocalCluster``. Use it as a
    context manager or call :meth:`start` / :meth:`stop`; attributes it does not have
    (``spec``, ``target``, ``started_tasks``, ...) are the cluster's.
    """

    def __init__(self, spec, *, exclude=None, port: int = 2222, subnet=None, **kwargs):
        self._jobs = load(spec)
        self._exclude = exclude
        self.excluded = select_tasks(exclude, self._jobs)
        self.port = int(port)
        started = [t for t in all_tasks(self._jobs) if t not in self.excluded]
        self._names: dict[Task, str] = {t: _host_name(t) for t in started}
        if len(set(self._names.values())) != len(self._names):
            raise ValueError(f"two tasks would share a host name: {sorted(self._names.values())}")
        self.hosts = Hosts(list(self._names.values()), subnet=subnet)
        self._kwargs = kwargs
        self.cluster: LocalCluster | None = None

    def start(self) -> PrivateCluster:
        self.hosts.up()
        try:
            spare = iter(free_ports(len(self.excluded)))
            jobs: dict[str, list[str]] = {}
            for task in all_tasks(self._jobs):
                if task in self.excluded:
                    address = f"{self.hosts.bridge_address}:{next(spare)}"
                else:
                    address = f"{self.hosts.address(self._names[task])}:{self.port}"
                jobs.setdefault(task.job, []).append(address)
            self.cluster = self.hosts.local_cluster(jobs, exclude=self._exclude, **self._kwargs)
            self.cluster.start()
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        try:
            if self.cluster is not None:
                self.cluster.stop()
        finally:
            self.hosts.down()

    def __enter__(self) -> PrivateCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __getattr__(self, name):
        if name in ("cluster", "hosts") or self.__dict__.get("cluster") is None:
            raise AttributeError(name)
        return getattr(self.cluster, name)

    def __repr__(self) -> str:
        inner = repr(self.cluster) if self.cluster is not None else "not started"
        return f"PrivateCluster on {self.hosts.subnet or 'no subnet yet'}: {inner}"


def private_cluster(spec, **kwargs) -> PrivateCluster:
    """A :class:`PrivateCluster` for ``spec`` (not started: call ``start()`` or use
    ``with``). Needs Linux, ``ip`` and root (:func:`unavailable_reason`)."""
    return PrivateCluster(spec, **kwargs)


# --------------------------------------------------------------------------- command line


def _status() -> str:
    found = ours()
    if not found:
        return "no hosts of dtf.netns on this machine"
    lines = []
    for tag, things in sorted(found.items()):
        owner = (
            f"process {tag[:-1]} ({'running' if _owner_alive(tag) else 'gone: a leftover'})"
            if tag[0].isdigit()
            else "python -m dtf.netns up (kept until down)"
        )
        lines.append(f"tag {tag}: made by {owner}")
        for ns in sorted(things["namespaces"]):
            addrs = [
                f"{a['local']}/{a['prefixlen']}"
                for entry in _json("-n", ns, "-4", "addr", "show")
                for a in entry.get("addr_info", [])
                if entry.get("ifname") != "lo"
            ]
            pids = processes_in(ns)
            lines.append(
                f"  namespace {ns:<24} {', '.join(addrs) or '-':<18} "
                f"{len(pids)} process{'es' if len(pids) != 1 else ''}"
            )
        for name in things["links"]:
            (entry,) = _json("link", "show", name)
            state = "up" if "UP" in entry.get("flags", []) else "down (cut)"
            lines.append(f"  link      {name:<24} {state}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=command_name("dtf-netns", "dtf.netns"),
        description="Hosts as Linux network namespaces on a private /24 (needs root).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="make hosts that stay until `down`")
    up.add_argument("--hosts", default=",".join(DEFAULT_HOSTS), help="comma-separated names")
    up.add_argument("--subnet", help="a free private /24 (default: the first free 10.213.N.0/24)")
    up.add_argument("--port", type=int, default=2222, help="the port of every task (2222)")
    up.add_argument("--tag", default=CLI_TAG, help=f"a name for these hosts ({CLI_TAG})")
    down = commands.add_parser("down", help="remove the hosts of `up` and every leftover")
    down.add_argument("--tag", default=CLI_TAG, help=f"the hosts to remove ({CLI_TAG})")
    down.add_argument(
        "--all", action="store_true", help="remove every host of dtf.netns, of any process"
    )
    commands.add_parser("status", help="list the hosts, links and processes of dtf.netns")
    args = parser.parse_args(argv)
    try:
        check_supported()
        if args.command == "status":
            print(_status())
            return 0
        if args.command == "down":
            with _machine_lock():
                removed = remove(args.tag) + clean_leftovers(everything=args.all)
            print(f"removed: {', '.join(removed)}" if removed else "nothing to remove")
            return 0
        names = [n.strip() for n in args.hosts.split(",") if n.strip()]
        hosts = Hosts(names, subnet=args.subnet, tag=args.tag).up()
        atexit.unregister(hosts.down)  # they stay until `python -m dtf.netns down`
        spec = hosts.cluster_spec(args.port)
        print(repr(hosts))
        print(f"cluster: {json.dumps(spec)}")
        print("start each server (as root):")
        for job, addresses in spec.items():
            for index, address in enumerate(addresses):
                host = hosts.host_of(address)
                assert host is not None, "cluster_spec() gives each host's own address"
                ns = hosts.namespace(host)
                if job == "host":  # the post's host is the client: it makes its own server
                    client = f"  then the client, as host/0: ip netns exec {ns} {sys.executable}"
                    continue
                print(
                    f"  ip netns exec {ns} {sys.executable} -m dtf.cluster.server "
                    f"--cluster-json '{json.dumps(spec)}' --job {job} --task {index}"
                )
        if "host" in spec:  # notebook 13's client program: the post's ops on every worker
            print(f"{client} -m dtf.lessons.post_client '{json.dumps(spec)}'")
        hint = deadline.client_hint(spec)  # what a client must do not to wait forever
        if hint:
            print(hint)
        exposure.warn_exposed(  # once (issue 19): the bridge reaches them, other machines not
            [args.port], "python -m dtf.netns up", reach=exposure.BRIDGE_REACH
        )
        tag = "" if args.tag == CLI_TAG else f" --tag {args.tag}"
        print(f"remove them with: python -m dtf.netns down{tag}")
        return 0
    except ValueError as exc:  # a wrong command line
        print(f"dtf-netns: error: {exc}", file=sys.stderr)
        return 2
    except NetnsError as exc:
        print(f"dtf-netns: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
