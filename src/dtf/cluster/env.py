"""The environment of the processes a cluster starts, and the gRPC keepalive defaults.

TensorFlow reads ``TF_GRPC_DEFAULT_OPTIONS`` (comma-separated ``name=value`` gRPC channel
arguments) once per process, when it creates its first gRPC channel: in a client at the first
``tf.config.experimental_connect_to_cluster`` or ``tf.compat.v1.Session(target)``, in a server
when it first talks to another task. Setting it after that changes nothing, so
:func:`apply_grpc_options` must run before the client connects (importing TensorFlow before
is fine). ``LocalCluster.start()`` calls it in the process that starts a cluster, so a client
in that process that connects afterwards gets it without asking (``tests/test_deadlines.py``).

Without keepalive, a remote call to a task that stops answering (a frozen process, a cut
link) waits forever: the TCP connection looks healthy. :data:`GRPC_OPTIONS` makes the client
send an HTTP/2 ping one second into every call and fail the call with ``UnavailableError:
ping timeout`` when no answer comes within two seconds, so a dead or frozen task is reported
~3 s after it stopped answering (measured on this machine with a ``SIGSTOP``-ed worker).

Why not more aggressive settings, such as ``grpc.http2.max_pings_without_data=0`` (unlimited
pings)? A TensorFlow server accepts at most two pings without data per 5 minutes (gRPC's
server defaults, which TensorFlow does not let us change) and closes the connection with
``UnavailableError: Too many pings`` on the third, so with unlimited pings every call that
runs longer than ~3 s fails (measured: a 10 s remote computation). With a limit on the pings
without data (two by default, one with the setting below) the client stops pinging after
those; a long remote computation then completes (measured: 40 s with two, 10 s with one), at
the price that a task freezing in the middle of one long call
is not detected by keepalive (a ``RunOptions(timeout_in_ms=...)`` deadline or a watchdog is
needed there).

Idle clients: with gRPC's default of two pings without data, a client connected to a task
and then idle for several seconds (a learner reading between two cells) got ``UnavailableError:
Too many pings`` on its next remote op (measured at idle gaps of 6 to 40 s). One ping without
data, ``grpc.http2.max_pings_without_data=1``, stays under the server's limit: no failure at
any idle gap from 2 to 40 s, and a frozen task is still reported in ~2.3 s (measured).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dtf import quiet

#: The variable TensorFlow reads its default gRPC channel arguments from.
GRPC_ENV = "TF_GRPC_DEFAULT_OPTIONS"
#: Keepalive defaults for every process a cluster starts, and for clients through
#: :func:`apply_grpc_options`: ping one second into a call, give up two seconds later.
GRPC_OPTIONS: Mapping[str, int] = {
    "grpc.keepalive_time_ms": 1000,
    "grpc.keepalive_timeout_ms": 2000,
    "grpc.http2.ping_timeout_ms": 2000,
    "grpc.http2.max_pings_without_data": 1,
}
#: The directory that holds the ``dtf`` package: put on the server processes' PYTHONPATH.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def grpc_options_value(options: Mapping[str, int | str] | None = None, existing: str = "") -> str:
    """``TF_GRPC_DEFAULT_OPTIONS`` text for ``options`` (default :data:`GRPC_OPTIONS`);
    entries already in ``existing`` (a current value of the variable) win."""
    merged = {k: str(v) for k, v in (GRPC_OPTIONS if options is None else options).items()}
    for item in (existing or "").split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            merged[name.strip()] = value.strip()
    return ",".join(f"{name}={value}" for name, value in merged.items())


def apply_grpc_options(
    options: Mapping[str, int | str] | None = None, *, override: bool = False
) -> str:
    """Set ``TF_GRPC_DEFAULT_OPTIONS`` in this process and return its value.

    Call it before this process first connects to a cluster (see the module docstring).
    Entries the variable already holds are kept unless ``override=True``.
    """
    existing = "" if override else os.environ.get(GRPC_ENV, "")
    value = grpc_options_value(options, existing)
    os.environ[GRPC_ENV] = value
    return value


def server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server process started from this one.

    A copy of ``base`` (default ``os.environ``, so a run token that tags processes is kept)
    with: TensorFlow's quiet settings unless already set, the keepalive defaults merged into
    ``TF_GRPC_DEFAULT_OPTIONS``, no ``TF_CONFIG`` (it belongs to the parent's own task) and
    the ``dtf`` package on ``PYTHONPATH``.
    """
    env = dict(os.environ if base is None else base)
    for name, value in quiet.SETTINGS.items():
        env.setdefault(name, value)
    env[GRPC_ENV] = grpc_options_value(None, env.get(GRPC_ENV, ""))
    env.pop("TF_CONFIG", None)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(PACKAGE_ROOT) not in paths:
        env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), *paths])
    return env
