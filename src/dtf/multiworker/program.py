"""The program every multi-worker worker runs: data, model, training step, checkpoints.

Nothing here imports TensorFlow at import time (a launcher imports it once, then forks), and
the same functions serve a single process: :func:`make_train_step` works under any strategy,
the default one included, so a notebook can repeat a multi-worker run in one process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dtf._util import error_line, whole_number

#: Exit status of a worker that stopped after an error it reported.
EXIT_ERROR = 1
#: Exit status of a worker that exceeded its ``deadline_s``, or waited too long while paused.
EXIT_DEADLINE = 3
#: Exit status after ``PreemptionCheckpointHandler`` saved a checkpoint (its default is 42).
EXIT_PREEMPTED = 42
NUM_CLASSES = 10
NUM_FEATURES = 64
HIDDEN_UNITS = 32
_TICK_S = 0.02
_DATA: tuple | None = None  # the digits arrays, loaded once (in the launcher: before forking)


@dataclass(frozen=True)
class TrainConfig:
    """What every worker of a run does; the same for all of them (one program).

    ``steps``: the step to train up to (a restored run continues from its checkpoint);
    ``per_worker_batch``: examples per worker and step (the global batch is this times the
    number of workers); ``checkpoint_every``: save with a ``CheckpointManager`` every that
    many steps into ``checkpoint_dir`` (0: never); ``preemption``: use a
    ``PreemptionCheckpointHandler`` on ``checkpoint_dir`` instead; ``pause_task`` /
    ``pause_after``: that worker waits after that step until resumed (``pause_timeout_s`` at
    most); ``try_fit``: first try Keras ``model.fit`` under the strategy; ``deadline_s``: a
    worker that runs longer ends itself (exit status :data:`EXIT_DEADLINE`).
    """

    steps: int = 40
    per_worker_batch: int = 32
    learning_rate: float = 0.1
    seed: int = 42
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    preemption: bool = False
    pause_task: int | None = None
    pause_after: int | None = None
    pause_timeout_s: float = 60.0
    try_fit: bool = False
    deadline_s: float = 120.0

    def __post_init__(self) -> None:
        whole_number("steps", self.steps, minimum=1)
        whole_number("per_worker_batch", self.per_worker_batch, minimum=1)
        whole_number("seed", self.seed, minimum=0)
        whole_number("checkpoint_every", self.checkpoint_every, minimum=0)
        for name in ("learning_rate", "pause_timeout_s", "deadline_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}.")
        if (self.checkpoint_every or self.preemption) and not self.checkpoint_dir:
            raise ValueError("checkpoint_every and preemption need a checkpoint_dir.")
        if self.checkpoint_every and self.preemption:
            raise ValueError(
                "choose checkpoint_every (a CheckpointManager) or preemption (a "
                "PreemptionCheckpointHandler, which manages its own checkpoints), not both."
            )
        if (self.pause_task is None) != (self.pause_after is None):
            raise ValueError("give pause_task and pause_after together.")
        if self.pause_task is not None:
            whole_number("pause_task", self.pause_task, minimum=0)
            whole_number("pause_after", self.pause_after, minimum=1, maximum=self.steps - 1)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        return cls(**json.loads(text))


# --------------------------------------------------------------------------- the program


def digits_arrays():
    """``(x, y)``: the digits training split as float32 ``(N, 64)`` in [0, 1] and int64."""
    global _DATA
    if _DATA is None:
        from dtf.data import load

        ds = load("digits", flatten=True)
        _DATA = (ds.x_train, ds.y_train)
    return _DATA


def global_batches(x, y, global_batch: int, seed: int, skip: int = 0):
    """The run's stream of global batches: shuffled with ``seed``, repeated, batched.

    Every worker builds the same stream; ``skip`` drops the batches a restored run has
    already trained on. Sharding is set to ``DATA`` explicitly: TensorFlow's default
    (``AUTO``) cannot shard a dataset made from tensors by files, falls back to ``DATA``
    and logs a warning saying so (tensorflow#66851).
    """
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(global_batch, drop_remainder=True).skip(skip)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    return ds.with_options(options)


def initial_weights(seed: int, hidden: int = HIDDEN_UNITS):
    """The MLP's starting weights from NumPy (Glorot-uniform kernels, zero biases)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = []
    for fan_in, fan_out in ((NUM_FEATURES, hidden), (hidden, NUM_CLASSES)):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype("float32"))
        weights.append(np.zeros(fan_out, "float32"))
    return weights


def build_model(seed: int, hidden: int = HIDDEN_UNITS):
    """The Keras MLP (64 -> hidden ReLU -> 10 logits) with :func:`initial_weights`."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((NUM_FEATURES,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(NUM_CLASSES),
        ]
    )
    model.set_weights(initial_weights(seed, hidden))
    return model


def make_optimizer(config: TrainConfig):
    import keras

    return keras.optimizers.SGD(config.learning_rate, momentum=0.9)


def make_train_step(strategy, model, optimizer, global_batch: int):
    """One training step as a ``tf.function`` of a (distributed) iterator; returns the loss.

    Works under any strategy, the default one of a single process included.
    """
    import keras
    import tensorflow as tf

    def step_fn(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            per_example = keras.losses.sparse_categorical_crossentropy(y, logits, True)
            # the sum over *all* workers' examples / the global batch: the mean loss
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        # apply_gradients all-reduces the gradients over the replicas, then updates
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(iterator):
        per_replica = strategy.run(step_fn, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return train_step


def _save_weights(path: Path, model, step: int) -> str:
    import numpy as np

    arrays = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    np.savez(path, step=np.int64(step), **arrays)
    return path.name


def _try_fit(strategy, config: TrainConfig, x, y, global_batch: int) -> dict:
    """Keras 3 ``model.fit`` under the strategy: what happens (keras-team/keras#20585)."""
    import keras

    with strategy.scope():
        model = build_model(config.seed)
        model.compile(
            optimizer=make_optimizer(config),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    began = time.monotonic()
    try:
        model.fit(x[: 2 * global_batch], y[: 2 * global_batch], batch_size=global_batch, verbose=0)
    except Exception as exc:  # noqa: BLE001 - the point is to report what fit raises
        print(f"model.fit: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return {"ok": False, "error": type(exc).__name__, "message": _fit_message(exc)}
    return {"ok": True, "seconds": round(time.monotonic() - began, 3)}


def short_message(exc: BaseException, limit: int = 400) -> str:
    return error_line(exc, limit).split(": ", 1)[-1]


def _fit_message(exc: BaseException) -> str:
    """The message of ``exc`` on one line, a ``PerReplica:{...}`` value's repr cut out."""
    text = re.sub(r"\(PerReplica:\{.*?\n\}\)", "(PerReplica:{...})", str(exc), flags=re.S)
    return " ".join(text.split())[:600]


_NODE = re.compile(r"^Detected at node (\S+)")
_NOISE = re.compile(r"^(Graph execution error:|File |\[\[\{\{node |:UNKNOWN:|\{grpc_)")


def error_summary(text: str) -> list[str]:
    """The lines of a TensorFlow runtime error that say what happened.

    TensorFlow's message holds the Python stack where the failing op was defined (file
    paths of this machine), gRPC internals and the op's graph name; kept are the failing
    node, the cause (``Collective ops is aborted by: ...``), the remote task involved and
    TensorFlow's advice.
    """
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        node = _NODE.match(line)
        if node:
            lines.append(f"at node {node[1]}")
        elif line and not _NOISE.match(line):
            lines.append(line[:300])
    return lines or ["(no message)"]


def train(config: TrainConfig, run_dir: Path, emit) -> int:
    """The program every worker runs (its ``TF_CONFIG`` is set); returns its exit status."""
    import tensorflow as tf

    x, y = digits_arrays()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    task = int(resolver.task_id)
    global_batch = config.per_worker_batch * strategy.num_replicas_in_sync
    emit("started", replicas=strategy.num_replicas_in_sync, global_batch=global_batch)
    if config.try_fit:
        emit("fit", **_try_fit(strategy, config, x, y, global_batch))

    with strategy.scope():
        model = build_model(config.seed)
        optimizer = make_optimizer(config)
        optimizer.build(model.trainable_variables)  # inside the scope, before the tf.function
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = handler = None
    if config.preemption:
        handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            resolver,
            checkpoint,
            checkpoint_dir=config.checkpoint_dir,
            termination_config=tf.distribute.experimental.TerminationConfig(
                exit_fn=lambda: _preempted(run_dir, model, step, task, emit)
            ),
        )
        start = int(step.numpy())  # restored by the handler (its own counter is deprecated)
    else:
        if config.checkpoint_every:
            # The chief writes the real directory; every other worker must save too (the
            # save is collective), into a directory of its own that nobody reads.
            directory = config.checkpoint_dir if task == 0 else _worker_dir(config, task)
            manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=2)
            latest = tf.train.latest_checkpoint(config.checkpoint_dir)  # the chief's
            if latest:
                checkpoint.restore(latest).assert_consumed()
        start = int(step.numpy())
    if start:
        step.assign(start)
        emit(
            "restored",
            step=start,
            weights=_save_weights(run_dir / f"restored-{task}.npz", model, start),
        )

    iterator = iter(
        strategy.experimental_distribute_dataset(
            global_batches(x, y, global_batch, config.seed, skip=start)
        )
    )
    train_step = make_train_step(strategy, model, optimizer, global_batch)
    loss = None
    for s in range(start + 1, config.steps + 1):
        try:
            loss = handler.run(train_step, iterator) if handler else train_step(iterator)
            loss = float(loss)
        except tf.errors.OpError as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            lines = error_summary(str(exc))
            emit("error", step=s, error=type(exc).__name__, message=lines[0], lines=lines)
            return EXIT_ERROR  # the collective runtime is broken now: exit and restart
        step.assign(s)
        emit("step", step=s, loss=loss)
        if manager is not None and s % config.checkpoint_every == 0:
            manager.save(checkpoint_number=s)
            saved = _save_weights(run_dir / f"checkpoint-{s}-{task}.npz", model, s)
            emit("checkpoint", step=s, weights=saved)
        if config.pause_task == task and s == config.pause_after:
            if not _pause(run_dir, task, config.pause_timeout_s, emit, s):
                return EXIT_DEADLINE
    final = _save_weights(run_dir / f"final-{task}.npz", model, config.steps)
    emit("done", step=config.steps, loss=loss, weights=final)
    _barrier(strategy)  # no worker leaves while another still needs it
    return 0


def _barrier(strategy) -> None:
    """One last all-reduce: returns once every worker has reached it."""
    import tensorflow as tf

    @tf.function
    def everyone():
        ones = strategy.run(lambda: tf.constant(1.0))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)

    everyone()


def _worker_dir(config: TrainConfig, task: int) -> str:
    return os.path.join(config.checkpoint_dir, f".worker-{task}-tmp")


def _pause(run_dir: Path, task: int, timeout: float, emit, step: int) -> bool:
    go = run_dir / f"go-{task}"
    emit("paused", step=step)
    deadline = time.monotonic() + timeout
    while not go.exists():
        if time.monotonic() >= deadline:
            emit("error", step=step, error="PauseTimeout", message=f"not resumed in {timeout} s")
            return False
        time.sleep(_TICK_S)
    emit("resumed", step=step)
    return True


def _preempted(run_dir: Path, model, step, task: int, emit) -> None:
    """``exit_fn`` of the handler: runs after it saved its checkpoint (``step`` included)."""
    saved = int(step.numpy())
    weights = _save_weights(run_dir / f"preempted-{task}.npz", model, saved)
    emit("preempted", step=saved, weights=weights)
    exit_now(EXIT_PREEMPTED)


def exit_now(code: int) -> None:
    """Leave the process at once: never wait on TensorFlow's threads or its shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
