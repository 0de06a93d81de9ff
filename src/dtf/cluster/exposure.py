"""Who can reach a cluster's servers, the warning that says so, and two ways to close them.

A TensorFlow server listens on *every* interface (``0.0.0.0`` or ``::``), whatever host its
spec names, and runs any graph sent to it without authentication (TensorFlow's
``SECURITY.md``): a graph can read and write files and start processes as the server's user.
A spec that says ``127.0.0.1`` keeps the cluster's own traffic on this machine; it does not
keep other machines out. So wherever the course starts servers (:meth:`LocalCluster.start
<dtf.cluster.LocalCluster.start>`, ``python -m dtf.cluster.server``, ``python -m dtf.netns up``) it
warns once per process with an :class:`ExposureWarning`, which names the ports and what to do.
A notebook that has read it can silence it deliberately::

    import warnings
    from dtf.cluster.exposure import ExposureWarning
    warnings.filterwarnings("ignore", category=ExposureWarning)

Two mitigations, both opt-in:

* :func:`dtf.netns.private_cluster` (Linux, root): the servers run in network namespaces of
  :mod:`dtf.netns`, on a private /24 behind a bridge that only this machine has: this machine's
  processes reach them at their private addresses, another machine cannot (it would need a route
  to that /24 through this machine, and forwarding on; ``ip_forward`` is 0 by default). Their
  ports are not open on this machine's own addresses at all. ``tests/test_exposure.py`` checks
  it with an "outside" host (a namespace wired to this machine's address): it runs an op in a
  plain :class:`~dtf.cluster.LocalCluster` and cannot connect to a private one.
* :func:`firewall_rules`: the ``iptables`` (and ``ip6tables``) or ``nft`` commands that drop
  connections to the given ports from anywhere but loopback (run them as root; remove them with
  the ``-D`` / ``delete table`` lines printed beside).
"""

from __future__ import annotations

import ipaddress
import os
import sys
import threading
import warnings
from collections.abc import Iterable
from types import FrameType

#: Keep a warning to this many ports' worth of text.
_SHOWN_PORTS = 8
#: ``iptables -m multiport`` takes at most 15 ports per rule.
_MULTIPORT_MAX = 15
_warned = False
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_lock = threading.Lock()


class ExposureWarning(UserWarning):
    """Servers were started that listen on every interface of this machine."""


#: Who reaches a server that listens on every interface of this machine.
ANYONE = "anyone who can reach this machine can run code as you"
#: The same for servers in :mod:`dtf.netns` hosts, behind the private bridge.
BRIDGE_REACH = (
    "every process on this machine, of any user, and every host on the private bridge can run "
    "code as you (other machines cannot: the bridge's /24 is not routed beyond this machine)"
)


def exposure_message(
    ports: Iterable[int], where: str = "LocalCluster.start()", reach: str = ANYONE
) -> str:
    """The text of the :class:`ExposureWarning` for servers on ``ports``; ``reach`` says who
    can reach them."""
    ports = sorted(set(ports))
    shown = ", ".join(map(str, ports[:_SHOWN_PORTS])) + (", ..." if len(ports) > 8 else "")
    one = len(ports) == 1
    advice = (
        "Keep a firewall that admits only the cluster's machines "
        "(dtf.cluster.exposure.firewall_rules(ports) prints the rules), or on Linux as root "
        "start the cluster with dtf.netns.private_cluster(spec), which only this machine "
        "can reach. "
        if reach == ANYONE
        else ""
    )
    return (
        f"{where}: the TensorFlow server{'' if one else 's'} on port{'' if one else 's'} "
        f"{shown} listen{'s' if one else ''} on every interface (0.0.0.0 or ::), whatever host "
        f"the spec names, and run{'s' if one else ''} any graph sent to "
        f"{'it' if one else 'them'}, unauthenticated: {reach}. {advice}"
        'Silence this warning with warnings.filterwarnings("ignore", '
        "category=dtf.cluster.ExposureWarning)."
    )


def warn_exposed(
    ports: Iterable[int], where: str = "LocalCluster.start()", stacklevel=None, reach: str = ANYONE
) -> bool:
    """Warn (:class:`ExposureWarning`) that servers listen on ``ports`` of every interface;
    once per process: returns whether it warned now. The warning points at the first caller
    outside the ``dtf`` package unless ``stacklevel`` says otherwise."""
    global _warned
    ports = [int(p) for p in ports]
    if not ports:
        return False
    with _lock:
        if _warned:
            return False
        _warned = True
    if stacklevel is None:
        stacklevel = 2
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            stacklevel, frame = stacklevel + 1, frame.f_back
        if frame is None or frame.f_code.co_filename.startswith("<"):  # python -m dtf...
            stacklevel -= 1  # the command's own line, not runpy's
    warnings.warn(exposure_message(ports, where, reach), ExposureWarning, stacklevel=stacklevel)
    return True


def listening_sockets(table: str) -> list[tuple[str, int]]:
    """``(address, port)`` of each listening socket in the text of a ``/proc/net/tcp`` or
    ``tcp6`` table (Linux), e.g. ``("0.0.0.0", 2222)``, ``("::", 2222)``."""
    found = []
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != "0A":  # 0A: LISTEN
            continue
        hex_ip, hex_port = fields[1].split(":")
        raw = bytes.fromhex(hex_ip)  # 32-bit words in host (little-endian) order
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
        found.append((str(ipaddress.ip_address(raw)), int(hex_port, 16)))
    return found


def listening(ports: Iterable[int]) -> dict[int, list[str]]:
    """For each port, the local addresses TCP sockets of this machine (this network
    namespace) listen on at it, e.g. ``{2222: ["0.0.0.0"]}``; read from ``/proc/net/tcp``
    and ``tcp6`` on Linux, from ``psutil`` elsewhere."""
    wanted: dict[int, list[str]] = {int(p): [] for p in ports}
    if os.path.exists("/proc/net/tcp"):
        for table in ("tcp", "tcp6"):
            try:
                with open(f"/proc/net/{table}", encoding="ascii") as f:
                    text = f.read()
            except OSError:
                continue
            for address, port in listening_sockets(text):
                if port in wanted:
                    wanted[port].append(address)
    else:  # pragma: no cover - macOS, Windows
        import psutil

        for conn in psutil.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port in wanted:
                wanted[conn.laddr.port].append(conn.laddr.ip)
    return {port: sorted(set(ips)) for port, ips in wanted.items()}


def firewall_rules(ports: Iterable[int], tool: str = "iptables") -> dict[str, list[str]]:
    """``{"add": [...], "remove": [...]}``: shell commands (run as root) that drop TCP
    connections to ``ports`` arriving on any interface but loopback, and that undo it.

    ``tool``: ``"iptables"`` (with ``ip6tables`` for IPv6) or ``"nft"`` (one table,
    ``inet dtf``, for both). Clients on this machine keep reaching the servers at
    ``127.0.0.1``; nothing else does (add ``-s ADDRESS -j ACCEPT`` rules before the drop for
    the cluster's other machines).
    """
    ports = sorted({int(p) for p in ports})
    if not ports:
        raise ValueError("no ports given")
    if tool == "nft":
        listed = ", ".join(map(str, ports))
        return {
            "add": [
                "nft add table inet dtf",
                "nft add chain inet dtf input '{ type filter hook input priority 0 ; }'",
                f"nft add rule inet dtf input iifname != lo tcp dport {{ {listed} }} drop",
            ],
            "remove": ["nft delete table inet dtf"],
        }
    if tool != "iptables":
        raise ValueError(f"tool must be 'iptables' or 'nft', got {tool!r}")
    add, remove = [], []
    for start in range(0, len(ports), _MULTIPORT_MAX):
        chunk = ",".join(map(str, ports[start : start + _MULTIPORT_MAX]))
        rule = f"INPUT ! -i lo -p tcp -m multiport --dports {chunk} -j DROP"
        for command in ("iptables", "ip6tables"):
            add.append(f"{command} -I {rule}")
            remove.append(f"{command} -D {rule}")
    return {"add": add, "remove": remove}
