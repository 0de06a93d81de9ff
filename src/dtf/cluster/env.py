"""The environment of the processes a cluster starts, and the gRPC keepalive defaults.

TensorFlow reads ``TF_GRPC_DEFAULT_OPTIONS`` (comma-separated ``name=value`` gRPC channel
arguments) once per process, when it creates its first gRPC channel: in a client at the first
``tf.config.experimental_connect_to_cluster`` or ``tf.compat.v1.Session(target)``, in a server
when it first talks to another task. Setting it after that changes nothing, so
:func:`apply_grpc_options` must run before the client connects (importing TensorFlow before
is fine). ``LocalCluster.start()`` calls it in the process that starts a cluster, so a client
in that process that connects afterwards gets it without asking (``tests/test_deadlines.py``).

Without keepalive, a remote call to a task that stops answering (a frozen process, a cut
link) waits forever: the TCP connection looks healthy. :data:`GRPC_OPTIONS` turns on gRPC's
client keepalive (https://github.com/grpc/grpc/blob/master/doc/keepalive.md): while a call
is open, the client pings the server (``grpc.keepalive_time_ms``, 1 s) and closes the
connection when a ping gets no answer within two seconds (``grpc.keepalive_timeout_ms``,
``grpc.http2.ping_timeout_ms``), failing every call on it with ``UnavailableError: ping
timeout``. When that happens depends on when the task stopped (measured on this machine with
``SIGSTOP``-ed workers, TensorFlow 2.21; ``tests/test_keepalive_claim.py`` repeats it):

* stopped before the call: reported ~2 s into the call (the call's first ping);
* stopped while a call already waits: reported about a minute later (measured: 57 s after a
  freeze 5 s into the call). After ``grpc.http2.max_pings_without_data`` pings without data
  (one, below) the client must send data before it pings again: gRPC's guide says that it
  then stops pinging, the gRPC inside TensorFlow 2.21 sends one ping a minute instead (the
  throttle of grpc/grpc#36374). A TF1 ``RunOptions(timeout_in_ms=...)`` deadline or
  :func:`dtf.cluster.run_with_deadline` reports it sooner;
* a call that waits on a *live* task, with no data either way, fails after about three
  minutes (measured: 180 s, ``UnavailableError: Too many pings`` or ``... ping timeout``;
  once more than 240 s on a loaded machine):
  the server counts a ping that comes less than 5 minutes after the last one without data
  as a strike, and at the third it closes the connection (gRPC's server defaults, the
  channel arguments ``GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS`` and
  ``GRPC_ARG_HTTP2_MAX_PING_STRIKES``, which TensorFlow's server does not let us change). No
  call of the course waits that long; a long computation answered sooner completes
  (measured: 40 s with two pings without data, 10 s with one).

Why not more aggressive settings, such as ``grpc.http2.max_pings_without_data=0`` (unlimited
pings)? The server's limit above then bites within seconds: with a ping every second, every
call that runs longer than ~3 s fails with ``Too many pings`` (measured: a 10 s remote
computation).

Idle clients: with gRPC's default of two pings without data, a client connected to a task
and then idle for several seconds (a learner reading between two cells) got ``UnavailableError:
Too many pings`` on its next remote op (measured at idle gaps of 6 to 40 s). One ping without
data, ``grpc.http2.max_pings_without_data=1``, stays under the server's limit: no failure at
any idle gap from 2 to 40 s, and a task stopped before a call is still reported in ~2 s.

An empty option set (``apply_grpc_options({})``) removes the variable: TensorFlow rejects an
empty value ("Invalid GRPC options format").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dtf import quiet

#: The variable TensorFlow reads its default gRPC channel arguments from.
GRPC_ENV = "TF_GRPC_DEFAULT_OPTIONS"
#: Keepalive defaults for every process a cluster starts, and for clients through
#: :func:`apply_grpc_options`: ping one second into a call, give up two seconds later (for a
#: call that already waits when its task stops: a minute later, see the module docstring).
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
    if value:
        os.environ[GRPC_ENV] = value
    else:  # nothing to set: TensorFlow rejects an empty value
        os.environ.pop(GRPC_ENV, None)
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
    value = grpc_options_value(None, env.get(GRPC_ENV, ""))
    if value:
        env[GRPC_ENV] = value
    else:  # no options (GRPC_OPTIONS emptied): TensorFlow rejects an empty value
        env.pop(GRPC_ENV, None)
    env.pop("TF_CONFIG", None)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(PACKAGE_ROOT) not in paths:
        env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), *paths])
    return env
