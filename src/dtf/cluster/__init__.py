"""Real TensorFlow clusters on one machine: one ``tf.distribute.Server`` process per task.

::

    from dtf.cluster import LocalCluster

    with LocalCluster({"worker": 2}) as cluster:        # free ports on 127.0.0.1
        cluster.spec                                    # tf.train.ClusterSpec
        cluster.target("worker/0")                      # "grpc://127.0.0.1:PORT"
        cluster.tf_config("worker/1")                   # TF_CONFIG JSON of that task
    # every server process has stopped here, also after an exception or an interrupt

In a notebook, where a ``with`` block cannot span cells, ``cluster = LocalCluster(...).start()``
and later ``cluster.stop()`` do the same (and ``stop`` runs at interpreter exit). The layout of
the *Distributed Computation in TensorFlow* post, where the notebook process is the ``host``
task, is ``LocalCluster("clusters/host_two_workers.json", exclude="host")``: the ``host``
task stays in the spec but no server is started for it.

Clients and tasks without a server
    An excluded task has an address in the spec but no server until the client creates
    one, and a TensorFlow client or master waits *forever* for every task of its spec that
    it may use. So the client plays that task: ``tf.config.experimental_connect_to_cluster(
    cluster.spec, job_name="host", task_index=0)`` starts the client's own server at host/0's
    address (TF2); a TF1 client either creates ``tf.distribute.Server(cluster.spec,
    job_name="host", task_index=0)`` and opens ``Session(server.target)``, or connects to a
    worker with ``ConfigProto(device_filters=["/job:worker"])`` so that worker's master looks
    for no other job.

Specs
    A dict of address lists, a JSON file, a ``tf.train.ClusterSpec`` or counts per job
    (``{"worker": 2, "ps": 1}``); every mistake is a :class:`ClusterConfigError` raised
    before anything starts (:mod:`dtf.cluster.spec` lists them).

Addresses: loopback by default
    Counted tasks get ``127.0.0.1``. A TensorFlow server listens on *every* interface
    (``0.0.0.0``) whatever host the spec names, and runs any graph sent to it without
    authentication (TensorFlow's ``SECURITY.md``): keep clusters on loopback on a laptop, and
    on a real network let a firewall admit only the cluster's machines. :meth:`LocalCluster.start`
    says so once per process with an :class:`ExposureWarning`; :func:`dtf.netns.private_cluster`
    (Linux, root) keeps the servers in network namespaces that only this machine reaches, and
    :func:`dtf.cluster.exposure.firewall_rules` gives the firewall rule
    (:mod:`dtf.cluster.exposure`). A ``LocalCluster`` starts only tasks whose host is this
    machine; tasks on other machines are started there with the command-line server,
    ``dtf-server`` or ``python -m dtf.cluster.server`` (:mod:`dtf.cluster.server`), and
    excluded here. ``command_prefix={"worker/0": ["ip", "netns", "exec", "ns0"], ...}`` starts
    a task's server under a command instead (``spawn`` only): :mod:`dtf.netns` uses it to run
    each task in a network namespace of its own, at its own address, as on separate machines.

Start methods: ``fork`` (default on Linux) and ``spawn`` (elsewhere)
    A server process spends nearly all its start-up time importing TensorFlow (~2 s without
    Keras, which servers never import; ~4-5 s with it), and on a 2-core machine four imports
    at once take ~2.5 times as long as one. With ``fork``, the cluster starts one *launcher*
    process (``python -m dtf.cluster._launcher``) that imports TensorFlow once, creates no op
    and no server, and forks one child per task; each child creates its server and reports
    ready, so a 4-task cluster is ready about as fast as a 1-task one. With ``spawn``, each
    task is a fresh ``python -m dtf.cluster.server`` process that imports TensorFlow itself.

    The trade-off: ``fork`` copies a process that has imported TensorFlow, and importing
    TensorFlow starts a few native threads; a child of a multi-threaded process inherits
    only the forking thread, and a lock another thread held at that moment stays locked in
    the child forever. The launcher forks only while it is idle (its own Python code is
    single-threaded and TensorFlow's threads wait), which is why the client process (a
    notebook that has run TensorFlow ops) is *never* forked. macOS does not allow a process
    that has initialised Apple's frameworks to fork safely, and Windows has no fork: there
    ``spawn`` is the default. Both are tested on Linux; pass ``start_method="spawn"`` if a
    forked server ever misbehaves.

Life and death of the servers
    :meth:`LocalCluster.stop` (and leaving the ``with`` block, even by an exception or a
    ``KeyboardInterrupt``) sends ``SIGTERM`` to every process it started and ``SIGKILL``
    after ``stop_grace`` seconds. If the process that holds the cluster dies without
    stopping it (a crashed or killed kernel), the servers exit by themselves: each holds the
    read end of a pipe whose write end only its parent holds (the launcher's or the server's
    standard input), and a thread in the server exits the process as soon as that pipe
    reaches end of file, which happens however the parent dies. On Linux the forked servers
    also ask the kernel for ``SIGKILL`` when the launcher dies (``PR_SET_PDEATHSIG``). The
    servers run in their own session, so a Ctrl-C in a terminal reaches only the client,
    which then stops them. All of this is :mod:`dtf.supervise`, which the multi-worker
    launcher (:mod:`dtf.multiworker`) shares: the launcher is its ``fork_server``.

Nothing hangs
    :meth:`LocalCluster.start` waits for every task's ready report at most
    ``ready_timeout`` seconds (:class:`ReadyTimeoutError` names the tasks that are late and
    shows the end of a log); a port that is taken is found before starting
    (:class:`PortInUseError`, "port N of task worker/1 is in use"); a task that dies while
    starting is a :class:`TaskFailedError` with its exit status and log. Once running,
    :meth:`LocalCluster.check` raises :class:`TaskFailedError` for a task that died, and
    :meth:`LocalCluster.alive` answers without raising; with a ``timeout`` both also ask each
    server for a gRPC handshake, which a frozen (``SIGSTOP``-ed) server never completes
    (:func:`answers` does the same for any address, remote ones too). A client that calls a
    task that stopped answering gets ``UnavailableError`` after ~3 s thanks to the gRPC
    keepalive defaults (:mod:`dtf.cluster.env`), which every server gets and a client gets from
    :func:`apply_grpc_options`, called before it connects (:meth:`LocalCluster.start` calls it
    too); a call that already waited when the task stopped gets it only about a minute later
    (gRPC's next ping, :mod:`dtf.cluster.env`). Ctrl-C cannot end a call blocked in
    TensorFlow: :func:`run_with_deadline` waits for a remote op at most N seconds and raises
    :class:`TaskTimeoutError` naming the task (:mod:`dtf.cluster.deadline`).

Measured on the course's reference machine (2 CPU cores, TensorFlow 2.21, other work running),
seconds until every task is ready: ``fork`` 1 task 2.2, 4 tasks 2.4 (of which the one
TensorFlow import 2.2); ``spawn`` 1 task 2.2, 4 tasks 5.0. ``tests/test_cluster.py`` prints
these times on every run.
"""

from dtf.cluster.deadline import TaskTimeoutError, run_with_deadline
from dtf.cluster.env import GRPC_ENV, GRPC_OPTIONS, apply_grpc_options, grpc_options_value
from dtf.cluster.exposure import ExposureWarning
from dtf.cluster.local import (
    DEFAULT_START_METHOD,
    READY_TIMEOUT_S,
    START_METHODS,
    LocalCluster,
    ReadyTimeoutError,
    TaskFailedError,
    answering,
    answers,
    describe_returncode,
)
from dtf.cluster.spec import (
    ClusterConfigError,
    ClusterError,
    PortInUseError,
    Task,
    free_ports,
    is_local_host,
    load,
    port_in_use,
    strategy_jobs,
    tf_config,
)

__all__ = [
    "DEFAULT_START_METHOD",
    "GRPC_ENV",
    "GRPC_OPTIONS",
    "READY_TIMEOUT_S",
    "START_METHODS",
    "ClusterConfigError",
    "ClusterError",
    "ExposureWarning",
    "LocalCluster",
    "PortInUseError",
    "ReadyTimeoutError",
    "Task",
    "TaskFailedError",
    "TaskTimeoutError",
    "answering",
    "answers",
    "apply_grpc_options",
    "describe_returncode",
    "free_ports",
    "grpc_options_value",
    "is_local_host",
    "load",
    "port_in_use",
    "run_with_deadline",
    "strategy_jobs",
    "tf_config",
]
