"""``MultiWorkerMirroredStrategy`` on one machine: one real process per worker.

Between-graph replication: every worker runs the *same* program, each with its own
``TF_CONFIG`` (the addresses of all workers, and which one it is). The strategy inside each
worker starts that worker's gRPC server, joins the others through TensorFlow's coordination
service, and all-reduces the gradients of every step with collective ops::

    from dtf.multiworker import Launcher, TrainConfig

    with Launcher() as launcher:                          # one TensorFlow import (below)
        run = launcher.run(TrainConfig(steps=40), num_workers=2)
        results = run.wait(timeout=60)                    # {0: WorkerResult, 1: ...}
        step, weights = run.weights("final", 0)           # what worker 0 ended with
    # every worker process has stopped here

Why not :class:`dtf.cluster.LocalCluster`
    Its processes are plain servers that run what a client sends them. A multi-worker worker
    *is* the program: the strategy creates the worker's server itself, on the port its
    ``TF_CONFIG`` names, so a separate server process would take that port. The ports and
    the ``TF_CONFIG`` still come from :mod:`dtf.cluster` (:func:`~dtf.cluster.free_ports`,
    :func:`~dtf.cluster.tf_config`).

One TensorFlow import for every worker (Linux)
    A worker spends ~3 s importing TensorFlow and Keras, two imports at once on two cores
    take twice that, and a notebook that restarts its workers after each failure would pay
    it every time. So on Linux the :class:`Launcher` starts one process
    (``python -m dtf.multiworker._process``) that imports TensorFlow and Keras and loads the
    digits data once, runs no op, and forks a fresh worker per task whenever a run starts,
    as :mod:`dtf.cluster` does for servers (its docstring explains why forking an idle
    process that has imported TensorFlow is safe enough, and why macOS and Windows spawn
    instead). With ``start_method="spawn"`` every worker is a fresh process that imports
    TensorFlow itself.

Nothing hangs, nothing is left behind
    Every wait has a timeout (:class:`WorkerTimeoutError` names the late worker and shows
    the end of its log, and names the workers that already exited, with their exit status
    and last log lines); the launcher kills every worker still running
    ``TrainConfig.deadline_s`` after the run started (from outside the worker, so a worker
    stuck in a call that never returns ends too). A worker that exits without reporting
    ``done`` did not train: it reports ``NotDone`` and exits with 1 (one that leaves with 0
    and no word makes :meth:`WorkerRun.wait` raise). A worker's standard error goes to its
    log from its first byte, so a worker that fails before its program runs (an import
    error) shows its traceback there and in its ``error`` event.
    :meth:`Launcher.stop` (also at the end of a ``with`` block, after an exception, and at
    interpreter exit) kills every worker and the launcher and removes the temporary folder
    of the runs. If the process holding the launcher dies, the launcher reads end of file on
    its standard input and kills its workers; a worker whose launcher is gone exits by
    itself (a lifeline pipe, and on Linux ``PR_SET_PDEATHSIG``); a spawned worker exits when
    its standard input, held by the parent, reaches end of file. The launcher is the same
    fork server as :mod:`dtf.cluster`'s (:func:`dtf.supervise.fork_server`).

The program (:mod:`dtf.lessons.worker_program`)
    Notebook 11 writes the worker program to a file, in parts, and runs it with
    ``launcher.run(config, num_workers, program=PATH)``: each worker runs the file with
    ``runpy`` as ``python PATH`` would, so a changed file changes what the next run's
    workers do. The same cells, marked ``# export: dtf/lessons/worker_program.py``, generate
    :mod:`dtf.lessons.worker_program` (``python -m tools.export``), the default program of a
    :class:`Launcher`. It is a small Keras MLP on scikit-learn's digits, trained by a custom
    loop: ``strategy.run`` of one step per replica, the loss averaged over the *global*
    batch with ``tf.nn.compute_average_loss``, the optimizer built inside
    ``strategy.scope()`` before the ``tf.function``; a seeded stream of global batches
    sharded by ``DATA``; a ``tf.train.CheckpointManager`` (the chief writes
    ``checkpoint_dir``, every other worker a folder of its own) with a restore that skips
    the batches already trained on, or a ``PreemptionCheckpointHandler``.

    What is not TensorFlow is :mod:`dtf.multiworker.worker`, the worker's side of a run:
    :class:`TrainConfig`, the events, and the pause (``pause_task`` / ``pause_after``: that
    worker waits after that step until :meth:`WorkerRun.resume`, so a failure is provoked at
    a known step). The handler's probe of a cloud metadata server goes to a closed loopback port
    (``GCE_METADATA_IP``).

Events
    Each worker reports what it does as events (``started``, ``fit``, ``restored``,
    ``step``, ``checkpoint``, ``paused``, ``resumed``, ``preempted``, ``error``, ``done``),
    each stamped with ``time.monotonic()``, one clock for every process of a machine: the
    time from killing a worker to its peer's error is the difference of two stamps.
    Errors come with :func:`error_summary`: the lines of TensorFlow's message that say what
    happened, without the stack of file paths.
"""

from dtf.multiworker.launcher import (
    DEFAULT_PROGRAM,
    DEFAULT_START_METHOD,
    READY_TIMEOUT_S,
    Launcher,
    WorkerError,
    WorkerResult,
    WorkerRun,
    WorkerTimeoutError,
)
from dtf.multiworker.worker import (
    EXIT_DEADLINE,
    EXIT_ERROR,
    EXIT_PREEMPTED,
    TrainConfig,
    Worker,
    digits_arrays,
    error_summary,
)

__all__ = [
    "DEFAULT_PROGRAM",
    "DEFAULT_START_METHOD",
    "EXIT_DEADLINE",
    "EXIT_ERROR",
    "EXIT_PREEMPTED",
    "READY_TIMEOUT_S",
    "Launcher",
    "TrainConfig",
    "WorkerError",
    "WorkerResult",
    "WorkerRun",
    "WorkerTimeoutError",
    "Worker",
    "digits_arrays",
    "error_summary",
]
